// A Redis outage both nodes lived through, with the order that used to report a connected phone
// offline made certain: each node reaches Redis through its own Toxiproxy proxy, both are cut
// until the phone's node (A, a `phonebridge serve` process) has lapsed in Redis, then the other
// node (B, a gateway in this process) gets Redis back first — B's heartbeat would reap A and
// its lookups find no owner — and A only 0.5 s after B has taken a client's call for A's
// phone. That call must wait for A to reclaim the phone and reach it: the phone's socket never
// closed (docs/decisions/0210-no-phone-offline-because-redis-was-down.md). A phone that really
// is offline still gets device_offline, after the reclaim grace.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { URL } from 'node:url';
import { outcomeWithReason, rawClient, startTestCluster, waitFor, type TestCluster } from '../cluster/harness.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { startToxiproxy, type Proxy, type Toxiproxy } from '../helpers/toxiproxy.ts';
import { REDIS_URL } from '../../src/bus/redis/test-support.ts';
import { RECLAIM_GRACE_MS } from '../../src/gateway/router.ts';
import type { ClusterNode } from '../../services/cluster.ts';

const TIMEOUT_MS = 10_000;
let toxiproxy: Toxiproxy;
let pA: Proxy;
let pB: Proxy;
let tc: TestCluster;
let A: ClusterNode;
let B: TestRelay;
const bId = `b-${process.pid}`;

beforeAll(async () => {
  toxiproxy = await startToxiproxy();
  const r = new URL(REDIS_URL);
  const upstream = `${r.hostname}:${r.port || 6379}`;
  pA = await toxiproxy.proxy('redis-a', upstream);
  pB = await toxiproxy.proxy('redis-b', upstream);
  tc = await startTestCluster({
    nodes: 1,
    nodeRedisUrl: pA.through(REDIS_URL),
    serveArgs: ['--request-timeout-ms', String(TIMEOUT_MS)],
  });
  [A] = tc.nodes;
  B = await startTestRelay([
    '--redis-url',
    pB.through(REDIS_URL),
    '--redis-prefix',
    tc.prefix,
    '--database-url',
    tc.databaseUrl,
    '--node-id',
    bId,
    '--request-timeout-ms',
    String(TIMEOUT_MS),
  ]);
}, 90_000);

afterAll(async () => {
  await B?.stop();
  await tc?.stop();
  await toxiproxy?.stop();
}, 60_000);

/** A's liveness deadline in Redis has passed (Redis' own clock, as the scripts read it). */
async function aLapsed(): Promise<boolean> {
  const [score, time] = await Promise.all([tc.redis.zscore(`${tc.ownPrefix}nodes`, A.id), tc.redis.time()]);
  const [s, us] = time.map(Number);
  return score === null || Number(score) < s * 1000 + Math.floor(us / 1000);
}

const epochOf = async (deviceId: string) => tc.redis.hget(`${tc.ownPrefix}dev:${deviceId}`, 'epoch');

describe('Redis back on one node before the other', () => {
  it("a call for a phone whose node has not reclaimed it yet waits for the reclaim; the phone's claim keeps its epoch", async () => {
    const phone = await tc.phone({ node: A, name: 'never disconnected' });
    const offline = await tc.phone({ node: A, name: 'really offline' });
    await offline.stop();
    await waitFor(async () => (await tc.ownerOf(offline.deviceId)) === undefined, 10_000, 'offline phone released');
    const client = await rawClient(B.url, await tc.key(phone.deviceId));
    const offlineClient = await rawClient(B.url, await tc.key(offline.deviceId));
    const bus = B.relay.node.ctx.bus;
    try {
      expect(outcomeWithReason(await client.call(B.url, 'warm', 'echo', { text: 'warm' }))).toBe('warm');
      const epoch = await epochOf(phone.deviceId);

      await Promise.all([pA.setEnabled(false), pB.setEnabled(false)]);
      await waitFor(() => !bus.available, 5000, 'B seeing Redis down');
      await waitFor(aLapsed, 10_000, "A's liveness lapsed in Redis");

      // B first: it renews itself (a heartbeat that used to reap A) and serves again.
      await pB.setEnabled(true);
      await waitFor(() => bus.available, 10_000, 'B back on Redis');
      expect(await aLapsed()).toBe(true); // A is still cut off: its phone has no live owner
      const sentAt = Date.now();
      let answeredAt = 0;
      const call = client.call(B.url, 'gap', 'echo', { text: 'across the gap' }).finally(() => {
        answeredAt = Date.now();
      });
      let offAt = 0;
      const offlineCall = offlineClient.call(B.url, 'off', 'echo', { text: 'nobody there' }).finally(() => {
        offAt = Date.now();
      });
      await new Promise((r) => setTimeout(r, 500));
      if (answeredAt)
        throw new Error(
          `answered ${answeredAt - sentAt} ms after it was sent, before A was back on Redis: ${outcomeWithReason(await call)}`,
        );

      await pA.setEnabled(true);
      const answer = await call;
      const off = await offlineCall;
      console.log(
        `Redis back on B first: the call for A's phone answered ${answeredAt - sentAt} ms after it was sent (A back 0.5 s after it); ` +
          `the offline phone: ${outcomeWithReason(off)} after ${offAt - sentAt} ms`,
      );
      expect(outcomeWithReason(answer)).toBe('across the gap');
      expect(answeredAt - sentAt).toBeLessThan(TIMEOUT_MS);
      // A phone that is really offline: device_offline once the grace is over, long before the deadline.
      expect(outcomeWithReason(off)).toMatch(/^error:device_offline/);
      expect(offAt - sentAt).toBeLessThan(RECLAIM_GRACE_MS + 2000);
      expect(phone.closes).toEqual([]);
      expect(A.alive).toBe(true);
      // A kept its claim: not reaped by B while B could not watch it, so its reclaim kept the epoch.
      await waitFor(async () => (await tc.ownerOf(phone.deviceId)) === A.id, 10_000, 'A owning the phone');
      expect(await epochOf(phone.deviceId)).toBe(epoch);
    } finally {
      await Promise.all([pA.setEnabled(true), pB.setEnabled(true)]);
      await client.close();
      await offlineClient.close();
      await phone.stop();
    }
  }, 90_000);
});
