// Allocation from a pool on two nodes over Redis and Postgres: exclusive under contention,
// online phones only unless asked, phones return on release, expiry and key revocation, and
// other fleet callers get device_allocated while the holder's calls (with its header) go through.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from './one-phone-fleet.ts';
import { startTestPhone, waitFor, type TestPhone } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { pairRaw } from '../helpers/raw-device.ts';
import { baseHeaders, post, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

let nodes: TwoNodes;
const phones: TestPhone[] = [];
let offlineId: string;
let k1: { id: string; token: string };
let k2: { id: string; token: string };
let admin: { id: string; token: string };

const allocate = (base: string, token: string, body: Record<string, unknown> = {}) =>
  api(base, token, 'POST', '/api/v1/allocations', { selector: { pool: 'p' }, ttl_s: 60, ...body });

async function releaseAll(token: string) {
  for (const base of [nodes.a.url]) {
    const list = await api(base, token, 'GET', '/api/v1/allocations');
    for (const a of list.json.items) await api(base, token, 'DELETE', `/api/v1/allocations/${a.id}`);
  }
}

beforeAll(async () => {
  nodes = await startTwoNodes();
  const store = nodes.a.relay.store.store;
  for (let i = 0; i < 10; i++) {
    const p = await startTestPhone(i % 2 ? nodes.b : nodes.a, () => createEchoServer(), { name: `pool-${i}` });
    phones.push(p);
    await store.fleet.updateLabels(p.deviceId, { set: { pool: 'p' }, remove: [] });
  }
  // Paired and labelled, never connected.
  const qr = await nodes.a.pair('offline');
  offlineId = (await pairRaw(nodes.a.url, qr.code)).deviceId;
  await store.fleet.updateLabels(offlineId, { set: { pool: 'p' }, remove: [] });
  k1 = await createFleetKey(store, { accountId: 'local', selector: 'pool=p', scopes: [...SCOPES] });
  k2 = await createFleetKey(store, { accountId: 'local', selector: 'pool=p', scopes: [...SCOPES] });
  admin = await createFleetKey(store, { accountId: 'local', scopes: [...SCOPES] });
}, 90_000);

afterAll(async () => {
  for (const p of phones) await p.stop().catch(() => {});
  await nodes?.stop();
});

describe('allocations', () => {
  it('50 concurrent requests for 10 phones from two nodes hand each online phone out once', async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => allocate(i % 2 ? nodes.b.url : nodes.a.url, i % 3 ? k1.token : k2.token)),
    );
    const won = results.filter((r) => r.status === 201);
    const lost = results.filter((r) => r.status !== 201);
    expect(won).toHaveLength(10);
    expect(new Set(won.map((r) => r.json.device_id)).size).toBe(10);
    expect(new Set(won.map((r) => r.json.device_id))).toEqual(new Set(phones.map((p) => p.deviceId)));
    expect(lost.every((r) => r.status === 409 && r.json.error === 'no_device_available')).toBe(true);
    for (const r of won) expect(r.json.mcp_url).toMatch(new RegExp(`/mcp/devices/${r.json.device_id}$`));

    // Offline phones only when asked.
    const offline = await allocate(nodes.a.url, k1.token, { include_offline: true });
    expect(offline.status).toBe(201);
    expect(offline.json.device_id).toBe(offlineId);
    await releaseAll(k1.token);
    await releaseAll(k2.token);
  }, 60_000);

  it('other fleet callers get device_allocated; the holder’s calls carry the allocation id', async () => {
    const a = await allocate(nodes.a.url, k1.token);
    expect(a.status).toBe(201);
    const url = a.json.mcp_url as string;
    const call = toolCall(1, 'echo', { text: 'mine' });
    const session = async (token: string, extra: Record<string, string> = {}) => {
      const h = { ...baseHeaders(token), ...extra };
      const r = await fetch(url, {
        method: 'POST',
        headers: h,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        }),
      });
      const text = await r.text();
      return { init: { status: r.status, json: JSON.parse(text) }, h, sid: r.headers.get('mcp-session-id') };
    };
    const other = await session(k2.token);
    expect(other.init.status).toBe(409);
    expect(other.init.json.error).toBe('device_allocated');
    const noHeader = await session(k1.token);
    expect(noHeader.init.status).toBe(409);
    const holder = await session(k1.token, { 'x-phonebridge-allocation': a.json.id });
    expect(holder.init.status).toBe(200);
    const sid = holder.sid;
    const ok = await post(url.replace(nodes.a.url, nodes.b.url), { ...holder.h, 'mcp-session-id': sid! }, call);
    expect(ok.status).toBe(200);
    expect(JSON.stringify(ok.json.result)).toContain('mine');

    // Released: the phone is free for anyone; the old allocation id is refused by name.
    expect((await api(nodes.b.url, k1.token, 'DELETE', `/api/v1/allocations/${a.json.id}`)).status).toBe(204);
    const stale = await post(url, { ...holder.h, 'mcp-session-id': sid! }, call);
    expect(stale.status).toBe(409);
    expect(stale.json.error).toBe('allocation_ended');
    expect((await session(k2.token)).init.status).toBe(200);
  });

  it('an expired allocation returns the phone to the pool; renew keeps it', async () => {
    // Take every phone, the kept one renewed, the others short.
    const all = await Promise.all(phones.map(() => allocate(nodes.a.url, k1.token, { ttl_s: 5 })));
    expect(all.every((r) => r.status === 201)).toBe(true);
    const kept = all[0].json;
    const renewed = await api(nodes.b.url, k1.token, 'POST', `/api/v1/allocations/${kept.id}/renew`, { ttl_s: 120 });
    expect(renewed.status).toBe(200);
    expect(Date.parse(renewed.json.expires_at)).toBeGreaterThan(Date.parse(kept.expires_at));
    expect((await allocate(nodes.b.url, k2.token)).status).toBe(409);
    let got: { status: number; json: any } | undefined;
    await waitFor(
      async () => (got = await allocate(nodes.b.url, k2.token)).status === 201,
      15_000,
      'an expired allocation freed its phone',
    );
    expect(got!.json.device_id).not.toBe(kept.device_id);
    await releaseAll(k1.token);
    await releaseAll(k2.token);
  });

  it('revoking the holder’s key returns its phones to the pool', async () => {
    const k3 = await createFleetKey(nodes.a.relay.store.store, {
      accountId: 'local',
      selector: 'pool=p',
      scopes: [...SCOPES],
    });
    const held = await Promise.all(phones.map(() => allocate(nodes.b.url, k3.token)));
    expect(held.every((r) => r.status === 201)).toBe(true);
    expect((await allocate(nodes.a.url, k1.token)).status).toBe(409);
    // A key with a selector cannot revoke keys; the account-wide one can.
    expect((await api(nodes.a.url, k1.token, 'DELETE', `/api/v1/keys/${k3.id}`)).status).toBe(403);
    expect((await api(nodes.a.url, admin.token, 'DELETE', `/api/v1/keys/${k3.id}`)).status).toBe(204);
    const again = await Promise.all(phones.map((_, i) => allocate(i % 2 ? nodes.a.url : nodes.b.url, k1.token)));
    expect(again.filter((r) => r.status === 201)).toHaveLength(10);
    expect((await api(nodes.b.url, k3.token, 'GET', '/api/v1/allocations')).status).toBe(401);
    await releaseAll(k1.token);
  });

  it('exposes fleet figures without per-phone labels on /metrics', async () => {
    const held = await allocate(nodes.a.url, k1.token);
    expect(held.status).toBe(201);
    const text = await (await fetch(`http://127.0.0.1:${nodes.a.relay.node.adminPort}/metrics`)).text();
    expect(text).toMatch(/phonebridge_fleet_allocation_requests_total\{outcome="allocated"\} [1-9]/);
    expect(text).toMatch(/phonebridge_fleet_allocation_requests_total\{outcome="none_available"\} [1-9]/);
    expect(text).toMatch(/phonebridge_fleet_allocations_active 1\n/);
    expect(text).toContain('phonebridge_fleet_allocation_wait_seconds_bucket');
    expect(text).not.toContain(held.json.device_id);
    await releaseAll(k1.token);
  });
});
