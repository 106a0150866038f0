// POST /api/v1/allocations on two nodes over Redis and Postgres, in an account of 600 paired
// phones: the one online phone among offline ones (a real socket on node a) and the one phone
// matching an `in` requirement on a hand-set label are handed out on every request, from
// either node, not only when a random page of candidates happens to hold them
// (docs/decisions/0171-allocation-atomicity.md, "Amended").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from './one-phone-fleet.ts';
import { pairMany } from './many-phones.ts';
import { startTestPhone, type TestPhone } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

const OFFLINE = 600;
const PIXEL = 313;

let nodes: TwoNodes;
let phone: TestPhone;
let offline: string[];

beforeAll(async () => {
  nodes = await startTwoNodes();
  const store = nodes.a.relay.store.store;
  phone = await startTestPhone(nodes.a, () => createEchoServer(), { name: 'the-online-one' });
  await store.fleet.updateLabels(phone.deviceId, { set: { pool: 'big', model: 'other' }, remove: [] });
  // Paired and labelled, never connected.
  offline = await pairMany(store, 'local', OFFLINE, (i) => ({
    pool: 'big',
    model: i === PIXEL ? 'pixel' : `other-${i % 9}`,
  }));
}, 120_000);

afterAll(async () => {
  await phone?.stop().catch(() => {});
  await nodes?.stop();
});

/** 20 allocations in a row, alternately on each node, each released before the next: the phone each got. */
async function inTurn(token: string, body: Record<string, unknown>) {
  const got: (string | number)[] = [];
  for (let i = 0; i < 20; i++) {
    const base = i % 2 ? nodes.b.url : nodes.a.url;
    const r = await api(base, token, 'POST', '/api/v1/allocations', { selector: {}, ttl_s: 60, ...body });
    got.push(r.status === 201 ? r.json.device_id : `${r.status} ${r.json?.error}`);
    if (r.status === 201)
      expect((await api(base, token, 'DELETE', `/api/v1/allocations/${r.json.id}`)).status).toBe(204);
  }
  return got;
}

describe(`allocation in an account of ${OFFLINE + 1} phones`, () => {
  it('hands out the one online phone of an offline pool every time', async () => {
    const key = await createFleetKey(nodes.a.relay.store.store, {
      accountId: 'local',
      selector: 'pool=big',
      scopes: [...SCOPES],
    });
    expect(await inTurn(key.token, {})).toEqual(Array(20).fill(phone.deviceId));
  }, 120_000);

  it('hands out the one phone matching `model in (…)` every time (offline phones asked for)', async () => {
    const key = await createFleetKey(nodes.a.relay.store.store, {
      accountId: 'local',
      selector: 'model in (pixel,pixel-pro)',
      scopes: [...SCOPES],
    });
    expect(await inTurn(key.token, { include_offline: true })).toEqual(Array(20).fill(offline[PIXEL]));
    // Not online: without include_offline there is none.
    const none = await api(nodes.b.url, key.token, 'POST', '/api/v1/allocations', { selector: {}, ttl_s: 60 });
    expect(none.status).toBe(409);
    expect(none.json.error).toBe('no_device_available');
  }, 120_000);
});
