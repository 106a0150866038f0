// A fleet key revoked while its allocation request waits (wait_s): whatever wakes the request,
// it ends with a clear refusal (401 unauthorized) and takes no phone. Each wake-up checks the
// key and the account again (src/fleet/api/routes.ts, stillAllowed). Two real nodes over Redis
// and Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onePhoneFleet } from './one-phone-fleet.ts';
import type { TwoNodes } from '../helpers/two-nodes.ts';
import { waitFor } from '../helpers/relay.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { poolWaiters } from '../../src/fleet/pool-waiters.ts';
import { SCOPES } from '../../src/store/index.ts';

let nodes: TwoNodes;
let phoneId: string;
let admin: { id: string; token: string };

beforeAll(async () => {
  ({ nodes, phoneId, admin } = await onePhoneFleet('only', { pool: 'rv' }));
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
});

describe('a fleet key revoked while its allocation waits', () => {
  it('is refused 401 when a phone frees up afterwards, not 500, and holds nothing', async () => {
    const store = nodes.a.relay.store.store;
    const waiter = await createFleetKey(store, { accountId: 'local', selector: 'pool=rv', scopes: [...SCOPES] });
    const body = { selector: { pool: 'rv' }, ttl_s: 60, include_offline: true };
    const held = await api(nodes.a.url, admin.token, 'POST', '/api/v1/allocations', body);
    expect(held.status).toBe(201);

    const waiters = poolWaiters(nodes.b.relay.node.ctx)!;
    const waiting = api(nodes.b.url, waiter.token, 'POST', '/api/v1/allocations', { ...body, wait_s: 20 });
    await waitFor(() => waiters.size === 1, 10_000, 'the request waiting on node b');

    // The account revokes the waiting key, then releases the phone: whichever wakes the request,
    // it takes no phone with a revoked key.
    expect((await api(nodes.a.url, admin.token, 'DELETE', `/api/v1/keys/${waiter.id}`)).status).toBe(204);
    expect((await api(nodes.a.url, admin.token, 'DELETE', `/api/v1/allocations/${held.json.id}`)).status).toBe(204);

    const r = await waiting;
    expect({ status: r.status, error: r.json?.error }).toEqual({ status: 401, error: 'unauthorized' });
    const d = await api(nodes.a.url, admin.token, 'GET', `/api/v1/devices/${phoneId}`);
    expect(d.json.allocated).toBe(false);
  }, 40_000);
});
