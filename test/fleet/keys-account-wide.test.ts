// docs/decisions/0175-api-v1.md: "Keys and enrollment codes (list, create, revoke) need an
// account-wide fleet key (no selector): 403 account_key_required otherwise." A fleet key limited
// by a selector must not mint device keys: a device key is bound to no selector, outlives the
// fleet key's revocation and is not subject to allocations.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onePhoneFleet } from './one-phone-fleet.ts';
import type { TwoNodes } from '../helpers/two-nodes.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

let nodes: TwoNodes;
let phoneId: string;
let admin: { id: string; token: string };

beforeAll(async () => {
  ({ nodes, phoneId, admin } = await onePhoneFleet('berlin-1', { site: 'berlin' }));
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
});

describe('creating a device key through /api/v1/keys', () => {
  it('needs an account-wide fleet key: a selector-limited key gets 403 account_key_required and mints nothing', async () => {
    const store = nodes.a.relay.store.store;
    const narrow = await createFleetKey(store, { accountId: 'local', selector: 'site=berlin', scopes: [...SCOPES] });
    const before = (await api(nodes.a.url, admin.token, 'GET', '/api/v1/keys')).json.items.length;
    const r = await api(nodes.b.url, narrow.token, 'POST', '/api/v1/keys', { device_id: phoneId });
    expect({ status: r.status, error: r.json?.error }).toEqual({ status: 403, error: 'account_key_required' });
    const after = (await api(nodes.a.url, admin.token, 'GET', '/api/v1/keys')).json.items.length;
    expect(after).toBe(before);
    // Listing and revoking keys already refuse this key (the same rule).
    expect((await api(nodes.b.url, narrow.token, 'GET', '/api/v1/keys')).json.error).toBe('account_key_required');
  });
});
