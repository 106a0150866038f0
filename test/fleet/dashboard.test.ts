// The hosted dashboard's fleet views: the phone list shows each phone's labels and filters by a
// selector (the same parser as /api/v1: a bad one is a clear error, the list stays whole); fleet
// keys are listed with their selector, count in the plan's key usage, and are revoked from it.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useHostedRelay } from '../hosted/hosted-relay.ts';
import { csrfOf, startAccountPhone, WebClient } from '../hosted/helpers.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';

const h = useHostedRelay({ args: ['--control-poll-ms', '50'] });

/** The text of the rows of the Phones table (tags stripped). */
const phoneRows = (html: string) =>
  [...(/id="phones-h"[\s\S]*?<\/section>/.exec(html)?.[0] ?? '').matchAll(/<tr><td>([\s\S]*?)<\/tr>/g)].map((m) =>
    m[1].replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' '),
  );

describe('the dashboard’s fleet views', () => {
  it('lists phones with labels, filters by selector, shows fleet keys in the plan and revokes them', async () => {
    const email = `fleet-${randomBytes(3).toString('hex')}@example.com`;
    const web = new WebClient(h.relay.url);
    await web.signIn(email, h.sink);
    const store = h.relay.relay.store.store;
    const account = (await store.accountByEmail(email))!;
    const berlin = await startAccountPhone(store, h.relay.url, account.id, 'berlin-1');
    const paris = await startAccountPhone(store, h.relay.url, account.id, 'paris-1');
    h.phones.push(berlin, paris);
    await store.fleet.updateLabels(berlin.deviceId, { set: { site: 'berlin', model: 'pixel8' }, remove: [] });
    await store.fleet.updateLabels(paris.deviceId, { set: { site: 'paris' }, remove: [] });

    const all = await web.get('/account');
    expect(all.status).toBe(200);
    const rows = phoneRows(all.html);
    expect(rows).toHaveLength(2);
    expect(rows.find((r) => r.includes('berlin-1'))).toContain('model=pixel8 site=berlin');
    expect(rows.find((r) => r.includes('paris-1'))).toContain('site=paris');

    const filtered = await web.get(`/account?selector=${encodeURIComponent('site in (berlin,rome),model')}`);
    expect(phoneRows(filtered.html).map((r) => r.includes('berlin-1'))).toEqual([true]);
    expect(filtered.html).toContain('1 of 2 phones match');
    // The phone's facts are labels too (phonebridge.dev/…), as for the API.
    const byFact = await web.get(`/account?selector=${encodeURIComponent('phonebridge.dev/app,site!=berlin')}`);
    expect(phoneRows(byFact.html).map((r) => r.includes('paris-1'))).toEqual([true]);

    const bad = await web.get(`/account?selector=${encodeURIComponent('site in berlin')}`);
    expect(bad.status).toBe(200);
    expect(bad.html).toMatch(/data-testid="selector-error">Not a selector \(bad_selector\): [^<]+/);
    expect(phoneRows(bad.html)).toHaveLength(2);

    // Fleet keys: listed with their selector, counted with the other credentials.
    const fleet = await createFleetKey(store, {
      accountId: account.id,
      selector: 'site=berlin',
      scopes: ['devices:read'],
    });
    const withKey = await web.get('/account');
    expect(withKey.html).toContain(fleet.id);
    expect(withKey.html).toMatch(/data-testid="fleet-key-selector">phones matching <code>site=berlin<\/code>/);
    expect(withKey.html).toMatch(/API keys, fleet keys and OAuth connections: 1 of /);
    expect(withKey.html).not.toContain(fleet.token);

    const revoked = await web.post('/account/keys/revoke', { csrf: csrfOf(withKey.html), key: fleet.id });
    expect(revoked.status).toBe(303);
    expect(await store.fleet.getKey(fleet.id)).toBeUndefined();
    const after = await web.get('/account');
    expect(after.html).not.toContain(fleet.id);
    expect(after.html).toMatch(/API keys, fleet keys and OAuth connections: 0 of /);
  }, 90_000);
});
