// Sentinel failover: a phone that disconnects while its node cannot reach Redis is released once
// the promoted replica serves, and no node stays named its owner. docs/OPERATIONS.md,
// "Failover": every node "resumes by itself once the new master serves: channels resubscribed,
// node re-announced, phones reclaimed … so ownership stays single"; src/bus/README.md: "on
// `onReconnected` call `reclaimDevice` for every local socket … and re-check local state that
// control events may have changed". The release the socket's close could not make is kept and
// made then, compare-and-delete (src/gateway/device-releases.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSentinel, type SentinelTopology } from '../../src/bus/redis/test-topologies.ts';
import { startTestCluster, sleep, waitFor, type TestCluster } from './harness.ts';

let topo: SentinelTopology | undefined;
let tc: TestCluster | undefined;

beforeAll(async () => {
  topo = await startSentinel(7470, 26470);
  tc = await startTestCluster({ nodes: 2, redisUrl: topo.url });
}, 90_000);

afterAll(async () => {
  await tc?.stop();
  await topo?.stop();
}, 60_000);

const redisUp = async (adminPort: number) =>
  ((await (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).json()) as { redis: { up: boolean } }).redis.up;

describe('Sentinel failover: a phone that disconnects while the master is gone', () => {
  it('is not left owned by its old node once the replica serves', async () => {
    const t = topo!;
    const c = tc!;
    const [A, B] = c.nodes;
    const phone = await c.phone({ node: A, name: 'leaves during the failover' });
    expect(await c.ownerOf(phone.deviceId)).toBe(A.id);
    await sleep(500); // the claim is on the replica too

    const before = await t.masterPort();
    await t.killMaster();
    await waitFor(async () => !(await redisUp(A.adminPort)), 5000, 'A noticing the outage');
    await phone.stop(); // the phone goes away for good; A's release cannot reach Redis

    await waitFor(async () => (await t.masterPort().catch(() => before)) !== before, 30_000, 'replica promoted');
    await waitFor(async () => (await redisUp(A.adminPort)) && (await redisUp(B.adminPort)), 15_000, 'nodes back');
    await sleep(3000);
    expect(A.alive).toBe(true);
    // Nobody holds the phone's socket: no live node may be named its owner.
    expect(await c.ownerOf(phone.deviceId)).toBeUndefined();
  }, 90_000);
});
