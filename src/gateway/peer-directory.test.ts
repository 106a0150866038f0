import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { RedisBus } from '../bus/redis/index.ts';
import { dropPrefix, quietLog, randomPrefix, REDIS_URL } from '../bus/redis/test-support.ts';
import { DEPARTED_MS, OWNER_CACHE_MS, PeerDirectory } from './peer-directory.ts';

const prefix = randomPrefix();
const open: RedisBus[] = [];
const uid = () => randomBytes(4).toString('hex');
const node = async () => {
  const b = await RedisBus.connect(REDIS_URL, `n-${uid()}`, quietLog, { prefix });
  open.push(b);
  return b;
};

afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((b) => b.close()));
});
afterAll(() => dropPrefix(prefix));

describe('PeerDirectory', () => {
  it("remembers an owner on another node until it expires or that node is forgotten, never this node's own", async () => {
    const [a, b] = [await node(), await node()];
    const [there, here] = [`d-${uid()}`, `d-${uid()}`];
    const epoch = await a.claimDevice(there);
    await b.claimDevice(here);
    const peers = new PeerDirectory(b);
    expect(await peers.lookupOwner(there)).toEqual({ nodeId: a.nodeId, epoch });
    expect(peers.cachedOwner(there)).toEqual({ nodeId: a.nodeId, epoch });
    expect(await peers.lookupOwner(here)).toEqual({ nodeId: b.nodeId, epoch: expect.any(Number) });
    expect(peers.cachedOwner(here)).toBeUndefined();

    peers.forgetOwner(there, 'some-other-node'); // not the node remembered: kept
    expect(peers.cachedOwner(there)?.nodeId).toBe(a.nodeId);
    peers.forgetOwner(there, a.nodeId);
    expect(peers.cachedOwner(there)).toBeUndefined();

    await peers.lookupOwner(there);
    peers.forgetNode(a.nodeId);
    expect(peers.cachedOwner(there)).toBeUndefined();

    vi.useFakeTimers({ toFake: ['Date'] });
    await peers.lookupOwner(there);
    vi.setSystemTime(Date.now() + OWNER_CACHE_MS - 1);
    expect(peers.cachedOwner(there)?.nodeId).toBe(a.nodeId);
    vi.setSystemTime(Date.now() + 2);
    expect(peers.cachedOwner(there)).toBeUndefined();
  });

  it("a goodbye forgets the node's owners; ending a departure ends only the goodbye it was given", async () => {
    const [a, b] = [await node(), await node()];
    const d = `d-${uid()}`;
    await a.claimDevice(d);
    const peers = new PeerDirectory(b);
    try {
      await peers.lookupOwner(d);
      expect(peers.hasDeparted(a.nodeId)).toBe(false);
      expect(peers.departure(a.nodeId)).toBeUndefined();
      peers.saidBye(a.nodeId);
      expect(peers.cachedOwner(d)).toBeUndefined();
      expect(peers.hasDeparted(a.nodeId)).toBe(true);
      const first = peers.departure(a.nodeId);
      peers.saidBye(a.nodeId); // a second goodbye (the node restarted and left again)
      peers.endDeparture(a.nodeId, first);
      expect(peers.hasDeparted(a.nodeId)).toBe(true);
      peers.endDeparture(a.nodeId, peers.departure(a.nodeId));
      expect(peers.hasDeparted(a.nodeId)).toBe(false);
      peers.endDeparture(a.nodeId, undefined); // nothing to end: a no-op
      expect(peers.hasDeparted(a.nodeId)).toBe(false);
    } finally {
      peers.close();
    }
  });

  it('a goodbye counts for DEPARTED_MS', async () => {
    const b = await node();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const peers = new PeerDirectory(b);
    peers.saidBye('gone');
    vi.advanceTimersByTime(DEPARTED_MS - 1);
    expect(peers.hasDeparted('gone')).toBe(true);
    vi.advanceTimersByTime(1);
    expect(peers.hasDeparted('gone')).toBe(false);
  });
});
