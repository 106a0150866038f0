// A fleet key reaches only the phones its selector matches (docs/decisions/0170-fleet-model.md,
// 0175-api-v1.md), and an allocation is taken only on such a phone. Once the phone is relabelled
// out of the key's selector the key can no longer drive it (403 outside_selector on its URL), so
// renewing that allocation must be refused too: otherwise the key keeps every other caller off a
// phone it cannot reach, for as long as it keeps renewing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onePhoneFleet } from './one-phone-fleet.ts';
import type { TwoNodes } from '../helpers/two-nodes.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

let nodes: TwoNodes;
let phoneId: string;
let admin: { id: string; token: string };

beforeAll(async () => {
  ({ nodes, phoneId, admin } = await onePhoneFleet('team-a-1', { team: 'a' }));
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
});

describe('renewing an allocation of a phone the key no longer reaches', () => {
  it('is refused (allocation_not_found) and the allocation is not extended', async () => {
    const store = nodes.a.relay.store.store;
    const teamA = await createFleetKey(store, { accountId: 'local', selector: 'team=a', scopes: [...SCOPES] });
    const a = await api(nodes.a.url, teamA.token, 'POST', '/api/v1/allocations', { ttl_s: 60, include_offline: true });
    expect(a.status).toBe(201);
    // The account moves the phone to team b (an account-wide key with devices:act).
    const moved = await api(nodes.a.url, admin.token, 'PATCH', `/api/v1/devices/${phoneId}`, { labels: { team: 'b' } });
    expect(moved.status).toBe(200);
    // The team-a key can no longer see the phone...
    expect((await api(nodes.b.url, teamA.token, 'GET', `/api/v1/devices/${phoneId}`)).status).toBe(404);
    // ...so it cannot keep it from team b for another day.
    const r = await api(nodes.b.url, teamA.token, 'POST', `/api/v1/allocations/${a.json.id}/renew`, { ttl_s: 86_400 });
    expect({ status: r.status, error: r.json?.error }).toEqual({ status: 404, error: 'allocation_not_found' });
    const held = await store.fleet.allocationOfDevice(phoneId, new Date());
    expect(held === undefined || held.expiresAt.getTime() <= Date.parse(a.json.expires_at)).toBe(true);
  });
});
