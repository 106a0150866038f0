// docs/decisions/0244-key-and-enrollment-routes-need-scopes.md: the key and enrollment routes of
// /api/v1 need scopes besides an account-wide key. Listing keys or enrollment codes needs
// devices:read; revoking a key needs every scope the revoked key holds (a key never takes away a
// power it does not hold); making or revoking an enrollment code needs devices:act. Two real
// nodes over Redis and Postgres, the calls on the node without the phone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onePhoneFleet } from './one-phone-fleet.ts';
import type { TwoNodes } from '../helpers/two-nodes.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

let nodes: TwoNodes;
let phoneId: string;
let admin: { id: string; token: string };
let reader: { id: string; token: string };

beforeAll(async () => {
  ({ nodes, phoneId, admin } = await onePhoneFleet('lab-1', { site: 'lab' }));
  reader = await createFleetKey(nodes.a.relay.store.store, { accountId: 'local', scopes: ['devices:read'] });
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
});

const refused = (r: { status: number; json: any }) => ({ status: r.status, error: r.json?.error });

describe('revoking a key through /api/v1/keys/{id}', () => {
  it('a devices:read key lists keys, cannot revoke a fleet key holding devices:act (which keeps working), revokes a devices:read one', async () => {
    const store = nodes.a.relay.store.store;
    const actor = await createFleetKey(store, { accountId: 'local', scopes: ['devices:read', 'devices:act'] });
    const listed = await api(nodes.b.url, reader.token, 'GET', '/api/v1/keys');
    expect(listed.status).toBe(200);
    expect(listed.json.items.map((k: { id: string }) => k.id)).toEqual(expect.arrayContaining([actor.id, reader.id]));

    const r = await api(nodes.b.url, reader.token, 'DELETE', `/api/v1/keys/${actor.id}`);
    expect(refused(r)).toEqual({ status: 403, error: 'insufficient_scope' });
    expect(r.json.message).toContain('devices:act');
    // Nothing changed: the key is stored, and it still relabels the phone on either node.
    expect(await store.fleet.getKey(actor.id)).toBeDefined();
    for (const base of [nodes.a.url, nodes.b.url]) {
      const relabel = await api(base, actor.token, 'PATCH', `/api/v1/devices/${phoneId}`, { labels: { by: 'actor' } });
      expect(relabel.status).toBe(200);
    }

    // A key holding every scope of the target revokes it, and the target is refused from then on.
    const watcher = await createFleetKey(store, { accountId: 'local', scopes: ['devices:read'] });
    expect((await api(nodes.b.url, reader.token, 'DELETE', `/api/v1/keys/${watcher.id}`)).status).toBe(204);
    expect((await api(nodes.b.url, watcher.token, 'GET', '/api/v1/devices')).status).toBe(401);
    const wider = await createFleetKey(store, {
      accountId: 'local',
      scopes: ['devices:read', 'devices:act', 'runs:start'],
    });
    expect((await api(nodes.b.url, wider.token, 'DELETE', `/api/v1/keys/${actor.id}`)).status).toBe(204);
    expect((await api(nodes.a.url, actor.token, 'GET', '/api/v1/devices')).status).toBe(401);
  });

  it('a devices:read key cannot revoke a device key holding devices:act either', async () => {
    const made = await api(nodes.b.url, admin.token, 'POST', '/api/v1/keys', {
      device_id: phoneId,
      scopes: ['devices:act'],
    });
    expect(made.status).toBe(201);
    const r = await api(nodes.b.url, reader.token, 'DELETE', `/api/v1/keys/${made.json.id}`);
    expect(refused(r)).toEqual({ status: 403, error: 'insufficient_scope' });
    const tokens = await nodes.a.relay.store.store.listTokens({ accountId: 'local' });
    expect(tokens.map((t) => t.id)).toContain(made.json.id);
    // The account-wide key with every scope revokes it.
    expect((await api(nodes.b.url, admin.token, 'DELETE', `/api/v1/keys/${made.json.id}`)).status).toBe(204);
  });

  it('a key that cannot read keys cannot list them', async () => {
    const runner = await createFleetKey(nodes.a.relay.store.store, { accountId: 'local', scopes: ['runs:start'] });
    const r = await api(nodes.b.url, runner.token, 'GET', '/api/v1/keys');
    expect(refused(r)).toEqual({ status: 403, error: 'insufficient_scope' });
    expect(r.json.message).toContain('devices:read');
  });
});

describe('enrollment codes through /api/v1/enrollments', () => {
  it('a key without devices:act makes no code and revokes none; it lists them with devices:read', async () => {
    const before = (await api(nodes.a.url, admin.token, 'GET', '/api/v1/enrollments')).json.items.length;
    const made = await api(nodes.b.url, reader.token, 'POST', '/api/v1/enrollments', { max_phones: 5, expires_s: 600 });
    expect(refused(made)).toEqual({ status: 403, error: 'insufficient_scope' });
    expect(made.json.message).toContain('devices:act');
    expect((await api(nodes.a.url, admin.token, 'GET', '/api/v1/enrollments')).json.items).toHaveLength(before);

    const code = await api(nodes.a.url, admin.token, 'POST', '/api/v1/enrollments', { max_phones: 5, expires_s: 600 });
    expect(code.status).toBe(201);
    const revoke = await api(nodes.b.url, reader.token, 'DELETE', `/api/v1/enrollments/${code.json.id}`);
    expect(refused(revoke)).toEqual({ status: 403, error: 'insufficient_scope' });
    const listed = await api(nodes.b.url, reader.token, 'GET', '/api/v1/enrollments');
    expect(listed.status).toBe(200);
    expect(listed.json.items.find((e: { id: string }) => e.id === code.json.id)).toMatchObject({ state: 'active' });

    // A key with devices:act (and no other scope) makes and revokes codes.
    const actor = await createFleetKey(nodes.a.relay.store.store, { accountId: 'local', scopes: ['devices:act'] });
    expect((await api(nodes.b.url, actor.token, 'DELETE', `/api/v1/enrollments/${code.json.id}`)).status).toBe(204);
    const own = await api(nodes.b.url, actor.token, 'POST', '/api/v1/enrollments', { max_phones: 1, expires_s: 600 });
    expect(own.status).toBe(201);
    const after = (await api(nodes.a.url, admin.token, 'GET', '/api/v1/enrollments')).json.items;
    expect(after.find((e: { id: string }) => e.id === code.json.id)).toMatchObject({ state: 'revoked' });
    expect(after.find((e: { id: string }) => e.id === own.json.id)).toMatchObject({ state: 'active' });
  });

  it('the scope is checked before the selector: a selector-limited key is refused either way, and makes nothing', async () => {
    const store = nodes.a.relay.store.store;
    const narrowReader = await createFleetKey(store, {
      accountId: 'local',
      selector: 'site=lab',
      scopes: ['devices:read'],
    });
    const narrowAll = await createFleetKey(store, { accountId: 'local', selector: 'site=lab', scopes: [...SCOPES] });
    const body = { max_phones: 1, expires_s: 600 };
    const before = (await api(nodes.a.url, admin.token, 'GET', '/api/v1/enrollments')).json.items.length;
    expect(refused(await api(nodes.b.url, narrowReader.token, 'POST', '/api/v1/enrollments', body))).toEqual({
      status: 403,
      error: 'insufficient_scope',
    });
    expect(refused(await api(nodes.b.url, narrowAll.token, 'POST', '/api/v1/enrollments', body))).toEqual({
      status: 403,
      error: 'account_key_required',
    });
    expect((await api(nodes.a.url, admin.token, 'GET', '/api/v1/enrollments')).json.items).toHaveLength(before);
  });
});
