// A locked account's fleet keys get 402 subscription_required (docs/decisions/0175-api-v1.md).
// An allocation request that is waiting (wait_s, up to 60 s) when the account is locked ends
// 402 and takes no phone: each wake-up checks the key and the account again
// (src/fleet/api/routes.ts, stillAllowed). Two real nodes over Redis and Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from './one-phone-fleet.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { pairRaw } from '../helpers/raw-device.ts';
import { waitFor } from '../helpers/relay.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { createPairing } from '../../src/provisioning.ts';
import { poolWaiters } from '../../src/fleet/pool-waiters.ts';
import { SCOPES } from '../../src/store/index.ts';

const ACCOUNT = 'acct_wait_lock';
let nodes: TwoNodes;

beforeAll(async () => {
  nodes = await startTwoNodes();
  const store = nodes.a.relay.store.store;
  const made = await store.createAccount({ id: ACCOUNT, email: null, maxDevices: null, maxKeys: null });
  expect(made.ok).toBe(true);
  const qr = await createPairing(store, { accountId: ACCOUNT, relay: nodes.a.url, name: 'only' });
  await pairRaw(nodes.a.url, qr.code);
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
});

describe('an account locked while its allocation request waits', () => {
  it('gets no phone when one frees up after the lock: 402 subscription_required, nothing allocated', async () => {
    const store = nodes.a.relay.store.store;
    const key = await createFleetKey(store, { accountId: ACCOUNT, scopes: [...SCOPES] });
    const held = await api(nodes.a.url, key.token, 'POST', '/api/v1/allocations', { ttl_s: 5, include_offline: true });
    expect(held.status).toBe(201);
    const waiters = poolWaiters(nodes.b.relay.node.ctx)!;
    const waiting = api(nodes.b.url, key.token, 'POST', '/api/v1/allocations', {
      ttl_s: 60,
      include_offline: true,
      wait_s: 30,
    });
    await waitFor(() => waiters.size === 1, 10_000, 'the request waiting on node b');
    await store.setAccountLocked(ACCOUNT, true);
    // The lock is in force for the API (a new request is refused) well before the phone frees up.
    await waitFor(
      async () => (await api(nodes.b.url, key.token, 'GET', '/api/v1/allocations')).status === 402,
      3_000,
      'the lock in force on node b',
    );
    expect(Date.now()).toBeLessThan(Date.parse(held.json.expires_at));
    const r = await waiting;
    expect({ status: r.status, error: r.json?.error }).toEqual({ status: 402, error: 'subscription_required' });
    // Only the allocation made before the lock, if it has not expired yet.
    const live = await store.fleet.listAllocations({ accountId: ACCOUNT }, new Date());
    expect(live.map((a) => a.id).filter((id) => id !== held.json.id)).toEqual([]);
  }, 45_000);
});
