// Redis restarted under load: a private redis-server (no persistence) is killed and started
// again on the same port while three nodes serve calls. The nodes must answer every request
// within its timeout (relay_unavailable while Redis is gone; never device_offline, since the
// phone never disconnected: docs/decisions/0210-no-phone-offline-because-redis-was-down.md), keep their
// phone sockets, and recover by themselves when Redis returns. Redis comes back empty, so
// sessions are gone then: clients get 404 and initialize again, as the MCP spec says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScratchRedis } from '../../src/bus/redis/test-support.ts';
import { rawClient, runLoad, sleep, startTestCluster, waitFor, type TestCluster } from './harness.ts';

let redis: ScratchRedis;
let tc: TestCluster;
const TIMEOUT_MS = 5000;

beforeAll(async () => {
  redis = await ScratchRedis.start();
  tc = await startTestCluster({
    nodes: 3,
    redisUrl: redis.url,
    serveArgs: ['--request-timeout-ms', String(TIMEOUT_MS)],
  });
}, 90_000);

afterAll(async () => {
  await tc?.stop();
  await redis?.kill();
}, 60_000);

describe('Redis restarted under load', () => {
  it('answers every request within its timeout, with relay_unavailable while Redis is gone (never device_offline), and recovers without a node restart', async () => {
    const [A, B, C] = tc.nodes;
    const pids = tc.nodes.map((n) => n.proc.pid);
    const phone = await tc.phone({ node: A, name: 'phone on A' });
    const token = await tc.key(phone.deviceId);
    const targets = { local: A.url, remote: B.url, front: tc.url, other: C.url };
    const loads = await Promise.all(
      Object.entries(targets).map(async ([tag, base]) => ({
        tag,
        load: runLoad({
          client: await rawClient(base, token),
          loops: 3,
          target: () => base,
          tag,
          pauseAfterErrorMs: 50,
          reinitialize: true,
        }),
      })),
    );
    await waitFor(() => loads.every(({ load }) => load.ok() >= 10), 20_000, 'load flowing');

    // phonebridge_redis_up on each node's /metrics: 1, 0 while Redis is gone, 1 again after.
    const redisUp = async () =>
      Promise.all(
        tc.nodes.map(async (n) => {
          const text = await (await fetch(`http://127.0.0.1:${n.adminPort}/metrics`)).text();
          return /^phonebridge_redis_up (\d+)$/m.exec(text)?.[1];
        }),
      );
    expect(await redisUp()).toEqual(['1', '1', '1']);
    const downAt = Date.now();
    await redis.kill();
    await waitFor(async () => (await redisUp()).every((v) => v === '0'), 2000, 'every node reporting Redis down');
    await sleep(Math.max(0, 2500 - (Date.now() - downAt)));
    const upAt = Date.now();
    await redis.restart();
    await waitFor(
      () => loads.every(({ load }) => load.records.some((r) => r.start > upAt && r.ok)),
      20_000,
      'calls succeeding again on every node',
    );
    const recoveredAt = Date.now();
    await waitFor(async () => (await redisUp()).every((v) => v === '1'), 5000, 'every node reporting Redis up');
    await sleep(500);
    const records = (await Promise.all(loads.map(({ load }) => load.stop()))).flat();

    const outage = records.filter((r) => r.end >= downAt && r.start < upAt);
    const errors = new Map<string, number>();
    for (const r of records.filter((x) => !x.ok)) errors.set(r.outcome, (errors.get(r.outcome) ?? 0) + 1);
    const slowest = Math.max(...records.map((r) => r.end - r.start));
    console.log(
      `Redis outage: ${records.length} calls, ${outage.length} during the ${upAt - downAt} ms outage; errors ${JSON.stringify(Object.fromEntries(errors))}; ` +
        `slowest answer ${slowest} ms; every node serving again ${recoveredAt - upAt} ms after Redis returned`,
    );

    // Never a hang: every request answered within its timeout (plus the origin's grace).
    expect(slowest).toBeLessThan(TIMEOUT_MS + 2500);
    for (const r of records) {
      if (r.ok) continue;
      if (r.outcome === 'session_lost') {
        // Redis came back empty: the session is gone (404) — only after Redis is back.
        expect(r.end).toBeGreaterThanOrEqual(upAt);
        continue;
      }
      expect(r.outcome, r.detail).toBe('error:relay_unavailable');
    }
    expect(outage.some((r) => !r.ok)).toBe(true); // the outage was felt
    // ...but not by clients of the phone's own node: their sessions are cached there.
    const localDuring = outage.filter((r) => r.expected.startsWith('local#') && r.start > downAt + 200 && r.end < upAt);
    expect(localDuring.length).toBeGreaterThan(0);
    expect(localDuring.every((r) => r.ok)).toBe(true);
    // No node restarted, the phone kept its socket and is owned again.
    expect(tc.nodes.map((n) => n.proc.pid)).toEqual(pids);
    expect(tc.nodes.every((n) => n.alive)).toBe(true);
    expect(phone.closes).toEqual([]);
    await waitFor(async () => (await tc.ownerOf(phone.deviceId)) === A.id, 10_000, 'the phone owned by A again');
  }, 90_000);
});
