// A phone whose device was removed while it was away (offline at the removal, or a copy of its
// state dir running elsewhere) comes back and is told it was removed (4004), on every node —
// and someone without its key learns nothing it could not learn before
// (docs/decisions/0230-removed-devices-are-remembered.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import {
  challenge,
  completeHandshake,
  openSocket,
  pairRaw,
  signedHeaders,
  type RawPhone,
} from '../helpers/raw-device.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';

/**
 * Signs a fresh challenge of node `r` as `phone` (or with another key) and waits for the relay
 * to close the socket. Each test node has a public URL of its own: the signature binds its host.
 */
async function connectAndClose(r: TestRelay, phone: RawPhone, key = phone.key) {
  const host = r.relay.node.ctx.config.relayHost;
  const s = await openSocket(r.url, signedHeaders(phone, await challenge(r.url, phone.deviceId), { key, host }));
  const closed = await s.closed;
  return { ...closed, frames: s.frames };
}

/** A paired phone that was online once and then went away. */
async function phoneThatWentAway(r: TestRelay): Promise<RawPhone> {
  const phone = await pairRaw(r.url, (await r.pair()).code);
  const s = await openSocket(r.url, signedHeaders(phone, await challenge(r.url, phone.deviceId)));
  await completeHandshake(s);
  s.ws.close();
  await s.closed;
  await waitFor(() => !r.relay.node.ctx.hub.device(phone.deviceId), 5000, 'the phone gone from the relay');
  return phone;
}

describe('a phone removed while it was away (embedded store)', () => {
  let relay: TestRelay;
  beforeAll(async () => {
    relay = await startTestRelay();
  });
  afterAll(async () => relay?.stop());

  it('is closed with 4004 "device removed" on each attempt to come back, and never attached', async () => {
    const phone = await phoneThatWentAway(relay);
    expect(await relay.relay.store.store.removeDevice(phone.deviceId)).toBe(true);
    for (let attempt = 0; attempt < 2; attempt++) {
      expect({ attempt, ...(await connectAndClose(relay, phone)) }).toEqual({
        attempt,
        code: 4004,
        reason: 'device removed',
        frames: [],
      });
    }
    expect(relay.relay.node.ctx.hub.device(phone.deviceId)).toBeUndefined();
  });

  it('is 4003 "bad signature" when signed with another key: the same answer as an id never paired', async () => {
    const phone = await phoneThatWentAway(relay);
    expect(await relay.relay.store.store.removeDevice(phone.deviceId)).toBe(true);
    const impostor = generateDeviceKey();
    const removedId = await connectAndClose(relay, phone, impostor);
    const neverPaired = await connectAndClose(relay, { ...phone, deviceId: 'dev_neverpaired' }, impostor);
    expect(removedId).toEqual({ code: 4003, reason: 'bad signature', frames: [] });
    expect(neverPaired).toEqual(removedId);
    // The phone itself still hears the truth afterwards.
    expect(await connectAndClose(relay, phone)).toMatchObject({ code: 4004, reason: 'device removed' });
  });
});

describe('a phone removed while it was away, two nodes on Postgres', () => {
  let nodes: TwoNodes;
  beforeAll(async () => {
    nodes = await startTwoNodes();
  });
  afterAll(async () => nodes?.stop());

  it('removed through one node, it is closed with 4004 on either node', async () => {
    const phone = await phoneThatWentAway(nodes.a);
    // Removed by the process of another node (as the CLI or the fleet API would).
    expect(await nodes.b.relay.store.store.removeDevice(phone.deviceId)).toBe(true);
    for (const [name, node] of [
      ['b', nodes.b],
      ['a', nodes.a],
    ] as const) {
      const closed = await connectAndClose(node, phone);
      expect({ name, code: closed.code, reason: closed.reason }).toEqual({
        name,
        code: 4004,
        reason: 'device removed',
      });
      expect(node.relay.node.ctx.hub.device(phone.deviceId)).toBeUndefined();
    }
  });
});
