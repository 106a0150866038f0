// /api/v1: the OpenAPI 3.1 document is valid by a real validator (@seriousme/openapi-schema-
// validator), is the one generated from the handlers' schemas, and a client generated from it
// (openapi-typescript types + openapi-fetch) drives the API: devices with labels and cursors,
// allocations, keys, enrollments; JSON errors with stable codes; a per-key rate limit.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import createClient from 'openapi-fetch';
import type { paths } from './generated/api-v1.ts';
import { generateApiTypes } from './api-types.ts';
import { createDatabase } from '../cluster/harness.ts';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { pairRaw } from '../helpers/raw-device.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { openApiDocument } from '../../src/fleet/api/openapi.ts';
import { ROUTES } from '../../src/fleet/api/routes.ts';
import { SCOPES } from '../../src/store/index.ts';

let db: { url: string; drop(): Promise<void> };
let relay: TestRelay;
let admin: { id: string; token: string };
const phoneIds: string[] = [];

beforeAll(async () => {
  db = await createDatabase();
  relay = await startTestRelay(['--database-url', db.url]);
  const store = relay.relay.store.store;
  for (let i = 0; i < 7; i++) {
    const qr = await relay.pair(`p${i}`);
    const id = (await pairRaw(relay.url, qr.code)).deviceId;
    phoneIds.push(id);
    await store.fleet.updateLabels(id, { set: { site: i < 5 ? 'berlin' : 'paris', n: String(i) }, remove: [] });
  }
  admin = await createFleetKey(store, { accountId: 'local', scopes: [...SCOPES] });
}, 60_000);

afterAll(async () => {
  await relay?.stop();
  await db?.drop();
});

describe('the OpenAPI document', () => {
  it('is valid OpenAPI 3.1 and is the one generated from the route schemas', async () => {
    const doc = (await (await fetch(`${relay.url}/api/v1/openapi.json`)).json()) as Record<string, unknown>;
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    // The validator does validate: the same document with an operation's response malformed is refused.
    const broken = JSON.parse(JSON.stringify(doc)) as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    broken.paths['/api/v1/devices'].get.responses['200'] = { content: 'not an object' };
    expect((await new Validator().validate(broken as never)).valid).toBe(false);
    expect(doc).toEqual(JSON.parse(JSON.stringify(openApiDocument(ROUTES, relay.url))));
  });

  it('lists each error code under the status the API answers it with', async () => {
    const doc = (await (await fetch(`${relay.url}/api/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>>;
    };
    const described = (path: string, method: string) =>
      Object.fromEntries(Object.entries(doc.paths[path][method].responses).map(([k, v]) => [k, v.description]));
    const list = described('/api/v1/devices', 'get');
    expect(list['400']).toContain('bad_selector');
    expect(list['400']).toContain('bad_cursor');
    expect(list['403']).toContain('insufficient_scope');
    expect(list['404']).toBeUndefined();
    for (const op of Object.values(doc.paths).flatMap((p) => Object.values(p))) {
      expect(op.responses['401'].description).not.toContain('fleet_key_required');
      expect(op.responses['403'].description).toContain('fleet_key_required');
    }
    const alloc = described('/api/v1/allocations', 'post');
    expect(alloc['409']).toBe('no_device_available');
    expect(alloc['400']).toContain('bad_selector');
    // Every allocation route needs devices:lease: the security requirement names it as its role.
    const allocationOps = [
      ['/api/v1/allocations', 'post'],
      ['/api/v1/allocations', 'get'],
      ['/api/v1/allocations/{id}/renew', 'post'],
      ['/api/v1/allocations/{id}', 'delete'],
    ];
    for (const [path, method] of allocationOps) {
      const op = doc.paths[path][method] as unknown as { security: unknown; description: string };
      expect(described(path, method)['403']).toContain('insufficient_scope');
      expect(op.security).toEqual([{ bearer: ['devices:lease'] }, { apiKey: ['devices:lease'] }]);
      expect(op.description).toContain('devices:lease');
    }
    expect((doc.paths['/api/v1/devices'].get as unknown as { security: unknown }).security).toEqual([
      { bearer: ['devices:read'] },
      { apiKey: ['devices:read'] },
    ]);
    expect(described('/api/v1/enrollments', 'post')['403']).toContain('account_key_required');
    expect(described('/api/v1/keys', 'post')['404']).toBe('device_not_found');
    // What the API answers, under those statuses.
    const bad = await fetch(`${relay.url}/api/v1/devices?selector=site%20in%20(`, {
      headers: { authorization: `Bearer ${admin.token}` },
    });
    expect([bad.status, ((await bad.json()) as { error: string }).error]).toEqual([400, 'bad_selector']);
  });

  it('the checked-in generated client types are current (scripts/gen-api-client.ts)', async () => {
    const current = readFileSync(new URL('./generated/api-v1.ts', import.meta.url), 'utf8');
    expect(current).toBe(await generateApiTypes());
  });
});

describe('a client generated from it', () => {
  const client = () => createClient<paths>({ baseUrl: relay.url, headers: { authorization: `Bearer ${admin.token}` } });

  it('pages through devices with a selector and cursors', async () => {
    const api = client();
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const r = await api.GET('/api/v1/devices', { params: { query: { selector: 'site=berlin', limit: 2, cursor } } });
      expect(r.response.status).toBe(200);
      for (const d of r.data!.items) {
        expect(d.labels.site).toBe('berlin');
        expect(d.online).toBe(false);
        seen.push(d.id);
      }
      if (!r.data!.next_cursor) break;
      cursor = r.data!.next_cursor;
    }
    expect(seen).toEqual(phoneIds.slice(0, 5).sort());
    const bad = await api.GET('/api/v1/devices', { params: { query: { selector: 'site in (' } } });
    expect(bad.response.status).toBe(400);
    expect(bad.error).toMatchObject({ error: 'bad_selector' });
  });

  it('sets and removes labels, refusing reserved and malformed ones by code', async () => {
    const api = client();
    const id = phoneIds[0];
    const r = await api.PATCH('/api/v1/devices/{id}', {
      params: { path: { id } },
      body: { labels: { model: 'pixel8', n: null } },
    });
    expect(r.response.status).toBe(200);
    expect(r.data!.labels).toEqual({ site: 'berlin', model: 'pixel8' });
    for (const labels of [{ 'phonebridge.dev/model': 'x' }, { site: 'not ok!' }] as Array<Record<string, string>>) {
      const bad = await api.PATCH('/api/v1/devices/{id}', { params: { path: { id } }, body: { labels } });
      expect(bad.response.status).toBe(400);
      expect(bad.error).toMatchObject({ error: 'bad_label' });
    }
    const missing = await api.GET('/api/v1/devices/{id}', { params: { path: { id: 'dev_nope' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error).toMatchObject({ error: 'device_not_found' });
  });

  it('allocates (offline phones when asked), renews and releases', async () => {
    const api = client();
    const none = await api.POST('/api/v1/allocations', { body: { selector: { site: 'paris' }, ttl_s: 60 } });
    expect(none.response.status).toBe(409);
    expect(none.error).toMatchObject({ error: 'no_device_available' });
    const a = await api.POST('/api/v1/allocations', {
      body: { selector: { site: 'paris' }, ttl_s: 60, include_offline: true },
    });
    expect(a.response.status).toBe(201);
    expect(phoneIds.slice(5)).toContain(a.data!.device_id);
    const renewed = await api.POST('/api/v1/allocations/{id}/renew', {
      params: { path: { id: a.data!.id } },
      body: { ttl_s: 600 },
    });
    expect(renewed.response.status).toBe(200);
    const del = await api.DELETE('/api/v1/allocations/{id}', { params: { path: { id: a.data!.id } } });
    expect(del.response.status).toBe(204);
    const again = await api.DELETE('/api/v1/allocations/{id}', { params: { path: { id: a.data!.id } } });
    expect(again.error).toMatchObject({ error: 'allocation_not_found' });
    const badTtl = await api.POST('/api/v1/allocations', { body: { ttl_s: 1 } });
    expect(badTtl.response.status).toBe(400);
    expect(badTtl.error).toMatchObject({ error: 'bad_request' });
  });

  it('allocations need devices:lease: a key without it is refused on every allocation route, and nothing changes', async () => {
    const api = client();
    const noLease = await createFleetKey(relay.relay.store.store, {
      accountId: 'local',
      scopes: ['devices:read', 'devices:act', 'runs:start'],
    });
    const other = createClient<paths>({ baseUrl: relay.url, headers: { 'x-api-key': noLease.token } });
    const refused = { error: 'insufficient_scope', message: 'this fleet key lacks the devices:lease scope' };
    const take = await other.POST('/api/v1/allocations', {
      body: { selector: { site: 'paris' }, ttl_s: 60, include_offline: true },
    });
    expect(take.response.status).toBe(403);
    expect(take.error).toEqual(refused);
    const paris = await api.GET('/api/v1/devices', { params: { query: { selector: 'site=paris' } } });
    expect(paris.data!.items.map((d) => d.allocated)).toEqual([false, false]);
    // One the leasing key holds: the other key can neither see, renew nor release it.
    const held = await api.POST('/api/v1/allocations', {
      body: { selector: { site: 'paris' }, ttl_s: 60, include_offline: true },
    });
    expect(held.response.status).toBe(201);
    const path = { id: held.data!.id };
    const list = await other.GET('/api/v1/allocations');
    const renew = await other.POST('/api/v1/allocations/{id}/renew', { params: { path }, body: { ttl_s: 600 } });
    const release = await other.DELETE('/api/v1/allocations/{id}', { params: { path } });
    for (const r of [list, renew, release]) {
      expect(r.response.status).toBe(403);
      expect(r.error).toEqual(refused);
    }
    expect((await api.GET('/api/v1/allocations')).data!.items).toEqual([held.data]);
    expect((await api.DELETE('/api/v1/allocations/{id}', { params: { path } })).response.status).toBe(204);
  });

  it('an expired allocation is not found, as a released or unknown one: release and renew answer 404 alike', async () => {
    const api = client();
    const a = await api.POST('/api/v1/allocations', {
      body: { selector: { site: 'paris' }, ttl_s: 5, include_offline: true },
    });
    expect(a.response.status).toBe(201);
    const path = { id: a.data!.id };
    const end = Date.parse(a.data!.expires_at);
    await waitFor(() => Date.now() > end, 10_000, 'the allocation’s expiry');
    const notFound = (id: string) => ({
      error: 'allocation_not_found',
      message: `no live allocation ${id} held by this key (released, expired or never made)`,
    });
    const release = await api.DELETE('/api/v1/allocations/{id}', { params: { path } });
    expect(release.response.status).toBe(404);
    expect(release.error).toEqual(notFound(path.id));
    const renew = await api.POST('/api/v1/allocations/{id}/renew', { params: { path }, body: {} });
    expect(renew.response.status).toBe(404);
    expect(renew.error).toEqual(notFound(path.id));
    const unknown = await api.DELETE('/api/v1/allocations/{id}', { params: { path: { id: 'alloc_nope' } } });
    expect(unknown.response.status).toBe(404);
    expect(unknown.error).toEqual(notFound('alloc_nope'));
    // The phone went back to the pool at the expiry, with or without the release.
    const d = await api.GET('/api/v1/devices/{id}', { params: { path: { id: a.data!.device_id } } });
    expect(d.data!.allocated).toBe(false);
  });

  it('a renewal without ttl_s lasts as long as the allocation’s last term, however often it is renewed', async () => {
    const api = client();
    const a = await api.POST('/api/v1/allocations', {
      body: { selector: { site: 'paris' }, ttl_s: 60, include_offline: true },
    });
    expect(a.response.status).toBe(201);
    const path = { id: a.data!.id };
    const left = (r: { data?: { expires_at: string } }) => (Date.parse(r.data!.expires_at) - Date.now()) / 1000;
    for (let i = 0; i < 3; i++) {
      await new Promise((res) => setTimeout(res, 1100));
      const r = await api.POST('/api/v1/allocations/{id}/renew', { params: { path }, body: {} });
      expect(r.response.status).toBe(200);
      expect(left(r)).toBeGreaterThan(58);
      expect(left(r)).toBeLessThanOrEqual(60);
    }
    const shorter = await api.POST('/api/v1/allocations/{id}/renew', { params: { path }, body: { ttl_s: 30 } });
    expect(left(shorter)).toBeLessThanOrEqual(30);
    await new Promise((res) => setTimeout(res, 1100));
    const again = await api.POST('/api/v1/allocations/{id}/renew', { params: { path }, body: {} });
    expect(left(again)).toBeGreaterThan(28);
    expect(left(again)).toBeLessThanOrEqual(30);
    expect((await api.DELETE('/api/v1/allocations/{id}', { params: { path } })).response.status).toBe(204);
  });

  it('creates a device key within the fleet key’s scopes, lists and revokes keys; makes enrollment codes', async () => {
    const api = client();
    const k = await api.POST('/api/v1/keys', { body: { device_id: phoneIds[1], scopes: ['devices:read'] } });
    expect(k.response.status).toBe(201);
    expect(k.data!.token).toMatch(/^pb_/);
    const list = await api.GET('/api/v1/keys');
    expect(list.data!.items.map((x) => x.id)).toEqual(expect.arrayContaining([k.data!.id, admin.id]));
    expect(JSON.stringify(list.data)).not.toContain(k.data!.token);
    expect((await api.DELETE('/api/v1/keys/{id}', { params: { path: { id: k.data!.id } } })).response.status).toBe(204);

    const narrow = await createFleetKey(relay.relay.store.store, {
      accountId: 'local',
      selector: 'site=berlin',
      scopes: ['devices:read'],
    });
    const napi = createClient<paths>({ baseUrl: relay.url, headers: { 'x-api-key': narrow.token } });
    const escalate = await napi.POST('/api/v1/keys', { body: { device_id: phoneIds[1], scopes: ['devices:act'] } });
    expect(escalate.error).toMatchObject({ error: 'insufficient_scope' });
    const outside = await napi.GET('/api/v1/devices/{id}', { params: { path: { id: phoneIds[6] } } });
    expect(outside.error).toMatchObject({ error: 'device_not_found' });
    expect((await napi.GET('/api/v1/enrollments')).error).toMatchObject({ error: 'account_key_required' });
    // A key that may only read changes no labels and removes no phone.
    const own = { params: { path: { id: phoneIds[1] } } };
    const relabel = await napi.PATCH('/api/v1/devices/{id}', { ...own, body: { labels: { site: 'paris' } } });
    expect(relabel.response.status).toBe(403);
    expect(relabel.error).toMatchObject({
      error: 'insufficient_scope',
      message: expect.stringContaining('devices:act'),
    });
    const removal = await napi.DELETE('/api/v1/devices/{id}', own);
    expect(removal.response.status).toBe(403);
    expect(removal.error).toMatchObject({ error: 'insufficient_scope' });
    expect((await api.GET('/api/v1/devices/{id}', own)).data).toMatchObject({ labels: { site: 'berlin' } });

    const e = await api.POST('/api/v1/enrollments', {
      body: { max_phones: 3, expires_s: 3600, labels: { rack: 'b' }, name_prefix: 'rack-b-' },
    });
    expect(e.response.status).toBe(201);
    const phone = await pairRaw(relay.url, e.data!.qr.code);
    const d = await api.GET('/api/v1/devices/{id}', { params: { path: { id: phone.deviceId } } });
    expect(d.data).toMatchObject({ name: 'rack-b-1', labels: { rack: 'b' } });
    const listed = await api.GET('/api/v1/enrollments');
    expect(listed.data!.items.find((x) => x.id === e.data!.id)).toMatchObject({ used: 1, state: 'active' });
    expect(JSON.stringify(listed.data)).not.toContain(e.data!.code);
    expect(
      (await api.DELETE('/api/v1/enrollments/{id}', { params: { path: { id: e.data!.id } } })).response.status,
    ).toBe(204);
  });

  it('answers keys it does not take with stable codes', async () => {
    const none = await fetch(`${relay.url}/api/v1/devices`);
    expect([none.status, ((await none.json()) as { error: string }).error]).toEqual([401, 'unauthorized']);
    const deviceKey = await relay.key(phoneIds[2]);
    const dk = await fetch(`${relay.url}/api/v1/devices`, { headers: { 'x-api-key': deviceKey.token } });
    expect([dk.status, ((await dk.json()) as { error: string }).error]).toEqual([403, 'fleet_key_required']);
  });

  it('a selector no phone can match: the 409 quotes it cut at 256 characters', async () => {
    const selector = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, `v${i}`]));
    const r = await client().POST('/api/v1/allocations', { body: { selector, ttl_s: 60 } });
    expect(r.response.status).toBe(409);
    expect(r.error).toMatchObject({ error: 'no_device_available', message: expect.stringContaining('k0=v0') });
    expect(r.error!.message.length).toBeLessThan(400);
  });
});

describe('malformed input', () => {
  it('a path that is not valid percent-encoding is a 400 (API) or 404 (phone URL), and the relay keeps serving', async () => {
    const headers = { authorization: `Bearer ${admin.token}` };
    for (const raw of ['%E0%A4%A', '%ZZ']) {
      const r = await fetch(`${relay.url}/api/v1/devices/${raw}`, { headers });
      expect(r.status).toBe(400);
      expect(await r.json()).toEqual({ error: 'bad_request', message: 'path.id: not valid percent-encoding' });
      const mcp = await fetch(`${relay.url}/mcp/devices/${raw}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      expect(mcp.status).toBe(404);
      expect(((await mcp.json()) as { error: string }).error).toBe('device_not_found');
    }
    const after = await fetch(`${relay.url}/api/v1/devices/${phoneIds[0]}`, { headers });
    expect(after.status).toBe(200);
  });

  it('a body with a field the API does not know (a misspelt "selector") is bad_request, and nothing is allocated', async () => {
    const headers = { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' };
    const r = await fetch(`${relay.url}/api/v1/allocations`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ selctor: { site: 'paris' }, ttl_s: 60, include_offline: true }),
    });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ error: 'bad_request', message: 'body: Unrecognized key: "selctor"' });
    const live = (await (await fetch(`${relay.url}/api/v1/allocations`, { headers })).json()) as { items: unknown[] };
    expect(live.items).toEqual([]);
  });

  it('a label patch that would take a phone past 64 labels is bad_label and changes nothing', async () => {
    const api = createClient<paths>({ baseUrl: relay.url, headers: { authorization: `Bearer ${admin.token}` } });
    const id = phoneIds[4];
    const many = (prefix: string, n: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 'x']));
    const first = await api.PATCH('/api/v1/devices/{id}', {
      params: { path: { id } },
      body: { labels: many('a', 60) },
    });
    expect(first.response.status).toBe(200);
    const before = first.data!.labels;
    expect(Object.keys(before)).toHaveLength(62);
    const over = await api.PATCH('/api/v1/devices/{id}', { params: { path: { id } }, body: { labels: many('b', 3) } });
    expect(over.response.status).toBe(400);
    expect(over.error).toEqual({ error: 'bad_label', message: 'at most 64 labels per phone (this change makes 65)' });
    expect((await api.GET('/api/v1/devices/{id}', { params: { path: { id } } })).data!.labels).toEqual(before);
    // Removing while adding counts what is left: 62 - 2 + 2 = 62.
    const swap = await api.PATCH('/api/v1/devices/{id}', {
      params: { path: { id } },
      body: { labels: { ...many('b', 2), a0: null, a1: null } },
    });
    expect(swap.response.status).toBe(200);
    const cleared = Object.fromEntries(
      Object.keys(swap.data!.labels)
        .filter((k) => k !== 'site' && k !== 'n')
        .map((k) => [k, null]),
    );
    const back = await api.PATCH('/api/v1/devices/{id}', { params: { path: { id } }, body: { labels: cleared } });
    expect(back.data!.labels).toEqual({ site: 'berlin', n: '4' });
  });
});

describe('a locked account', () => {
  it('its fleet keys get 402 while it is locked and work again as soon as it is unlocked', async () => {
    const store = relay.relay.store.store;
    const made = await store.createAccount({ id: 'acct_locktest', email: null, maxDevices: null, maxKeys: null });
    expect(made.ok).toBe(true);
    const k = await createFleetKey(store, { accountId: 'acct_locktest', scopes: ['devices:read'] });
    const status = async () =>
      (await fetch(`${relay.url}/api/v1/devices`, { headers: { 'x-api-key': k.token } })).status;
    expect(await status()).toBe(200);
    await store.setAccountLocked('acct_locktest', true);
    await waitFor(async () => (await status()) === 402, 5_000, 'the locked account answered 402');
    expect(await status()).toBe(402);
    await store.setAccountLocked('acct_locktest', false);
    // The control poll is 250 ms; the key cache lives 30 s, so a cached locked account would still be 402.
    await waitFor(async () => (await status()) === 200, 3_000, 'the unlocked account answered 200');
  });
});

describe('the per-key rate limit', () => {
  it('answers 429 rate_limited past the budget, per key', async () => {
    const limited = await startTestRelay(['--database-url', db.url, '--api-requests-per-minute', '5']);
    try {
      const k = await createFleetKey(limited.relay.store.store, { accountId: 'local', scopes: [...SCOPES] });
      const other = await createFleetKey(limited.relay.store.store, { accountId: 'local', scopes: [...SCOPES] });
      const get = (t: string) =>
        fetch(`${limited.url}/api/v1/allocations`, { headers: { authorization: `Bearer ${t}` } });
      const statuses = [];
      for (let i = 0; i < 7; i++) statuses.push((await get(k.token)).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
      const r = await get(k.token);
      expect(r.headers.get('retry-after')).toBe('60');
      expect(((await r.json()) as { error: string }).error).toBe('rate_limited');
      expect((await get(other.token)).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });
});
