// The store work of phone accepts, batched (src/gateway/device-batch.ts,
// docs/decisions/0140-cheaper-device-accepts.md): against the relay's real store.
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import {
  challenge,
  completeHandshake,
  openSocket,
  pairRaw,
  signedHeaders,
  type RawPhone,
} from '../helpers/raw-device.ts';
import { DeviceKeyLookup, DeviceSeenWriter } from '../../src/gateway/device-batch.ts';
import { createLogger } from '../../src/log.ts';
import type { DeviceSeen, Store } from '../../src/store/types.ts';

let relay: TestRelay;
let store: Store;
const phones: RawPhone[] = [];

beforeAll(async () => {
  relay = await startTestRelay();
  store = relay.relay.store.store;
  for (let i = 0; i < 4; i++) phones.push(await pairRaw(relay.url, (await relay.pair()).code));
});
afterAll(async () => relay?.stop());

/** The real store, with its calls to `method` recorded (each call's argument). */
function recording<K extends 'getDeviceKeys' | 'getRemovedDevices' | 'recordDevicesSeen'>(method: K) {
  const calls: unknown[][] = [];
  const real = store[method].bind(store) as (arg: never) => Promise<unknown>;
  const wrapped = { [method]: (arg: never) => (calls.push([...(arg as unknown[])]), real(arg)) } as unknown as Pick<
    Store,
    K
  >;
  return { store: wrapped, calls };
}

/** Both lookups of the real store, each recorded. */
function recordingLookups() {
  const keys = recording('getDeviceKeys');
  const removed = recording('getRemovedDevices');
  return { store: { ...keys.store, ...removed.store }, calls: keys.calls, removedCalls: removed.calls };
}

describe('DeviceKeyLookup', () => {
  it('answers the lookups of one turn with one query, unknown ids as undefined after one more query for them', async () => {
    const r = recordingLookups();
    const lookup = new DeviceKeyLookup(r.store);
    const ids = [phones[0].deviceId, 'dev_nobody', phones[1].deviceId, phones[0].deviceId];
    const got = await Promise.all(ids.map((id) => lookup.get(id)));
    expect(r.calls).toHaveLength(1);
    expect(new Set(r.calls[0])).toEqual(new Set([phones[0].deviceId, 'dev_nobody', phones[1].deviceId]));
    expect(r.removedCalls).toEqual([['dev_nobody']]);
    expect(got[0]).toEqual({ accountId: expect.any(String), publicKey: phones[0].key.publicKeySpkiBase64 });
    expect(got[1]).toBeUndefined();
    expect(got[3]).toEqual(got[0]);
  });

  it("answers a removed device's key with when it was removed; a batch of known phones asks nothing more", async () => {
    const gone = await pairRaw(relay.url, (await relay.pair()).code);
    expect(await store.removeDevice(gone.deviceId)).toBe(true);
    const r = recordingLookups();
    const lookup = new DeviceKeyLookup(r.store);
    const [live, removed] = await Promise.all([lookup.get(phones[0].deviceId), lookup.get(gone.deviceId)]);
    expect(live).toEqual({ accountId: expect.any(String), publicKey: phones[0].key.publicKeySpkiBase64 });
    expect(removed).toEqual({
      accountId: expect.any(String),
      publicKey: gone.key.publicKeySpkiBase64,
      removedAt: expect.any(Date),
    });
    expect(r.removedCalls).toEqual([[gone.deviceId]]);
    await Promise.all([lookup.get(phones[1].deviceId), lookup.get(phones[2].deviceId)]);
    expect(r.calls).toHaveLength(2);
    expect(r.removedCalls).toHaveLength(1);
  });

  it('sends lookups that arrive while one is in flight together, after it', async () => {
    const r = recordingLookups();
    const lookup = new DeviceKeyLookup(r.store);
    const first = lookup.get(phones[0].deviceId);
    await new Promise((res) => setImmediate(res)); // the first query is on its way
    const later = [lookup.get(phones[1].deviceId), lookup.get(phones[2].deviceId)];
    expect((await first)?.publicKey).toBe(phones[0].key.publicKeySpkiBase64);
    expect((await Promise.all(later)).map((k) => k?.publicKey)).toEqual([
      phones[1].key.publicKeySpkiBase64,
      phones[2].key.publicKeySpkiBase64,
    ]);
    expect(r.calls.map((c) => c.length)).toEqual([1, 2]);
  });

  it('fails every lookup of a batch whose query failed, and the next batch runs', async () => {
    let fail = true;
    const lookup = new DeviceKeyLookup({
      getDeviceKeys: (ids) => (fail ? Promise.reject(new Error('store down')) : store.getDeviceKeys(ids)),
      getRemovedDevices: (ids) => store.getRemovedDevices(ids),
    });
    const failed = await Promise.allSettled([lookup.get(phones[0].deviceId), lookup.get(phones[1].deviceId)]);
    expect(failed.map((f) => f.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect((await lookup.get(phones[0].deviceId))?.publicKey).toBe(phones[0].key.publicKeySpkiBase64);
  });

  it('fails only the unknown ids when the removed-device query fails: the keys it found stand', async () => {
    const lookup = new DeviceKeyLookup({
      getDeviceKeys: (ids) => store.getDeviceKeys(ids),
      getRemovedDevices: () => Promise.reject(new Error('store down')),
    });
    const [found, unknown] = await Promise.allSettled([lookup.get(phones[0].deviceId), lookup.get('dev_nobody')]);
    expect(found).toEqual({
      status: 'fulfilled',
      value: { accountId: expect.any(String), publicKey: phones[0].key.publicKeySpkiBase64 },
    });
    expect(unknown.status).toBe('rejected');
  });
});

describe('DeviceSeenWriter', () => {
  const log = createLogger({ level: 'silent' });

  it('writes last-seen times that arrive within its delay in one statement; flush writes at once', async () => {
    const r = recording('recordDevicesSeen');
    const writer = new DeviceSeenWriter(r.store, log, 10_000);
    const t = new Date(Date.now() + 60_000);
    writer.seen(phones[0].deviceId, t);
    writer.seen(phones[1].deviceId, t);
    await new Promise((res) => setTimeout(res, 20));
    expect(r.calls).toHaveLength(0); // waiting for others to join
    await writer.flush();
    expect(r.calls).toHaveLength(1);
    expect((r.calls[0] as DeviceSeen[]).map((e) => e.id)).toEqual([phones[0].deviceId, phones[1].deviceId]);
    expect(await store.getDevice(phones[1].deviceId)).toMatchObject({ lastSeenAt: t });
  });

  it('writes an initialize result at the end of its turn, with what waited; what arrives meanwhile goes next', async () => {
    const r = recording('recordDevicesSeen');
    const writer = new DeviceSeenWriter(r.store, log, 10_000);
    const t = new Date(Date.now() + 90_000);
    writer.seen(phones[1].deviceId, t); // a last-seen alone would wait 10 s
    writer.seen(phones[0].deviceId, t, { probe: 1 });
    await waitFor(() => r.calls.length === 1);
    expect((r.calls[0] as DeviceSeen[]).map((e) => e.id)).toEqual([phones[1].deviceId, phones[0].deviceId]);
    writer.seen(phones[2].deviceId, t, { probe: 2 }); // the first statement may still run
    await waitFor(() => r.calls.length === 2);
    await writer.flush();
    expect(await store.getDevice(phones[0].deviceId)).toMatchObject({ initResult: { probe: 1 }, lastSeenAt: t });
    expect(await store.getDevice(phones[2].deviceId)).toMatchObject({ initResult: { probe: 2 } });
  });

  it('drops a batch the store refused and writes the next one', async () => {
    let fail = true;
    const writer = new DeviceSeenWriter(
      {
        recordDevicesSeen: (e) => (fail ? Promise.reject(new Error('store down')) : store.recordDevicesSeen(e)),
      },
      log,
      1,
    );
    const t = new Date(Date.now() + 120_000);
    writer.seen(phones[2].deviceId, t);
    await writer.flush();
    expect((await store.getDevice(phones[2].deviceId))?.lastSeenAt?.getTime()).not.toBe(t.getTime());
    fail = false;
    writer.seen(phones[2].deviceId, t);
    await waitFor(async () => (await store.getDevice(phones[2].deviceId))?.lastSeenAt?.getTime() === t.getTime());
  });
});

describe('accepts on the relay', () => {
  it('store the initialize result and last-seen on connect, and last-seen again on close', async () => {
    const p = phones[3]; // last seen never set by the tests above
    const before = Date.now();
    const s = await openSocket(relay.url, signedHeaders(p, await challenge(relay.url, p.deviceId)));
    await completeHandshake(s);
    await waitFor(() => !!relay.relay.node.ctx.hub.device(p.deviceId)?.initResult);
    const init = relay.relay.node.ctx.hub.device(p.deviceId)!.initResult;
    await waitFor(async () => {
      const d = await store.getDevice(p.deviceId);
      return isDeepStrictEqual(d?.initResult, init) && d!.lastSeenAt!.getTime() >= before; // jsonb reorders keys
    });
    const connectedSeen = (await store.getDevice(p.deviceId))!.lastSeenAt!.getTime();
    await new Promise((r) => setTimeout(r, 20));
    s.ws.close();
    await s.closed;
    await waitFor(async () => (await store.getDevice(p.deviceId))!.lastSeenAt!.getTime() > connectedSeen);
  });
});
