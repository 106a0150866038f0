// POST /api/v1/allocations with wait_s, two nodes over Redis and Postgres: a waiter gets the
// phone another caller releases on the other node, the phone whose allocation expires, and a
// phone that comes online — woken by the event, not by a look at the store it happened to make
// (docs/decisions/0177-allocation-wait.md). Without wait_s, or when nothing frees up, 409 at the end.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestPhone, tempDir, waitFor, type TestPhone } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { createEnrollment } from '../../src/fleet/enroll.ts';
import { DeviceAgent } from '../../src/device/agent/index.ts';
import { createLogger } from '../../src/log.ts';
import { SCOPES } from '../../src/store/index.ts';
import { poolWaiters } from '../../src/fleet/pool-waiters.ts';

let nodes: TwoNodes;
let phone: TestPhone; // on node a
let holder: { id: string; token: string };
let waiter: { id: string; token: string };

/** How long a waiting allocation goes without a look when nothing wakes it (src/fleet/api/routes.ts). */
const FALLBACK_MS = 15_000;

async function api(base: string, token: string, method: string, path: string, body?: unknown) {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : undefined, at: Date.now() };
}

beforeAll(async () => {
  nodes = await startTwoNodes();
  const store = nodes.a.relay.store.store;
  phone = await startTestPhone(nodes.a, () => createEchoServer(), { name: 'only' });
  await store.fleet.updateLabels(phone.deviceId, { set: { pool: 'wait' }, remove: [] });
  holder = await createFleetKey(store, { accountId: 'local', selector: 'pool=wait', scopes: [...SCOPES] });
  waiter = await createFleetKey(store, { accountId: 'local', selector: 'pool=wait', scopes: [...SCOPES] });
  // The phone's own "online" announcement must have reached both nodes before a test counts
  // looks: on a loaded machine it can arrive after the first waiter went to sleep, and wake it.
  await waitFor(
    () => [nodes.a, nodes.b].every((n) => (poolWaiters(n.relay.node.ctx)?.generation('local') ?? 0) > 0),
    20_000,
    'the phone online announced on both nodes',
  );
}, 60_000);

afterAll(async () => {
  await phone?.stop().catch(() => {});
  await nodes?.stop();
});

const ask = (base: string, token: string, body: Record<string, unknown>) =>
  api(base, token, 'POST', '/api/v1/allocations', { selector: { pool: 'wait' }, ttl_s: 60, ...body });

describe('an allocation that waits (wait_s)', () => {
  it('gets the phone another caller releases on the other node, woken by the release', async () => {
    const held = await ask(nodes.a.url, holder.token, {});
    expect(held.status).toBe(201);
    expect((await ask(nodes.b.url, waiter.token, {})).status).toBe(409);

    // Counts the waiter's looks for a free phone on its node (the real store, observed).
    const looks = vi.spyOn(nodes.b.relay.store.store.fleet, 'freeDevices');
    const started = Date.now();
    const waiting = ask(nodes.b.url, waiter.token, { wait_s: 45 });
    let answered = false;
    void waiting.then(() => (answered = true));
    await new Promise((r) => setTimeout(r, 2000));
    expect(answered).toBe(false);
    // One look, then asleep until something happens: no polling of the store.
    expect(looks.mock.calls.length).toBe(1);
    looks.mockRestore();

    const released = await api(nodes.a.url, holder.token, 'DELETE', `/api/v1/allocations/${held.json.id}`);
    expect(released.status).toBe(204);
    const got = await waiting;
    expect(got.status).toBe(201);
    expect(got.json.device_id).toBe(phone.deviceId);
    // Its only look at the store without a wake-up would have come FALLBACK_MS after it began.
    expect(got.at).toBeGreaterThanOrEqual(released.at - 50);
    expect(got.at - started).toBeLessThan(FALLBACK_MS);
    expect((await api(nodes.b.url, waiter.token, 'DELETE', `/api/v1/allocations/${got.json.id}`)).status).toBe(204);
  }, 60_000);

  it('gets the phone whose allocation expires, at its expiry', async () => {
    const held = await ask(nodes.a.url, holder.token, { ttl_s: 5 });
    expect(held.status).toBe(201);
    const expiresAt = Date.parse(held.json.expires_at);
    const got = await ask(nodes.b.url, waiter.token, { wait_s: 40 });
    expect(got.status).toBe(201);
    expect(got.json.device_id).toBe(phone.deviceId);
    expect(got.at).toBeGreaterThanOrEqual(expiresAt);
    expect((await api(nodes.b.url, waiter.token, 'DELETE', `/api/v1/allocations/${got.json.id}`)).status).toBe(204);
  }, 60_000);

  it('gets a matching phone that comes online on the other node', async () => {
    const held = await ask(nodes.a.url, holder.token, {});
    expect(held.status).toBe(201);
    // A phone enrolled into the pool (labelled by its code) that has not connected yet.
    const e = await createEnrollment(nodes.a.relay.store.store, {
      accountId: 'local',
      maxPhones: 1,
      expiresMs: 600_000,
      labels: { pool: 'wait' },
      relay: nodes.a.url,
    });
    const stateDir = tempDir('pb-phone-');
    const log = createLogger({ level: 'silent' });
    const identity = await DeviceAgent.pair({ stateDir, qr: { ...e.qr, relay: nodes.b.url }, name: 'late', log });
    const agent = new DeviceAgent({ stateDir, createServer: () => createEchoServer(), log });
    try {
      const started = Date.now();
      const waiting = ask(nodes.a.url, waiter.token, { wait_s: 45 });
      await new Promise((r) => setTimeout(r, 1000));
      agent.start();
      await waitFor(() => !!nodes.b.relay.node.ctx.hub.device(identity.device_id), 10_000, 'the phone connected');
      const got = await waiting;
      expect(got.status).toBe(201);
      expect(got.json.device_id).toBe(identity.device_id);
      expect(got.at - started).toBeLessThan(FALLBACK_MS);
    } finally {
      await agent.stop();
      await api(nodes.a.url, holder.token, 'DELETE', `/api/v1/allocations/${held.json.id}`);
    }
  }, 60_000);

  it('answers 409 no_device_available when nothing frees up within wait_s', async () => {
    const held = await ask(nodes.a.url, holder.token, {});
    expect(held.status).toBe(201);
    const started = Date.now();
    const r = await ask(nodes.b.url, waiter.token, { wait_s: 2 });
    expect(r.status).toBe(409);
    expect(r.json.error).toBe('no_device_available');
    expect(r.at - started).toBeGreaterThanOrEqual(1900);
    expect((await api(nodes.a.url, holder.token, 'DELETE', `/api/v1/allocations/${held.json.id}`)).status).toBe(204);
  }, 30_000);
});
