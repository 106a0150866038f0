// Redis stops answering while its connections stay open (a private redis-server frozen with
// SIGSTOP), and a client calls the phone held by the node it reached. docs/OPERATIONS.md, the
// failure table's row "Redis stops answering (no close)": "remote calls: `relay_unavailable` …;
// local calls unaffected", and "Redis unreachable": "Every bus call fails fast … Clients of a
// phone held by the node they reach keep working". Once the node has declared Redis down, its
// bus refuses calls without sending them (docs/decisions/0251-a-bus-declared-down-sends-nothing.md):
// neither the session lookup of each call nor the replay buffer's append of each SSE event
// waits out a 1 s command timeout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScratchRedis } from '../../src/bus/redis/test-support.ts';
import { startTestCluster, sleep, waitFor, rawClient, outcome, type TestCluster } from '../cluster/harness.ts';
import { connectClient } from '../helpers/relay.ts';

let redis: ScratchRedis;
let tc: TestCluster;

beforeAll(async () => {
  redis = await ScratchRedis.start();
  tc = await startTestCluster({
    nodes: 2,
    redisUrl: redis.url,
    serveArgs: ['--request-timeout-ms', '20000'],
  });
}, 60_000);

afterAll(async () => {
  redis?.signal('SIGCONT');
  await tc?.stop();
  await redis?.kill();
}, 60_000);

const redisUp = async (adminPort: number) =>
  ((await (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).json()) as { redis: { up: boolean } }).redis.up;

describe('Redis stops answering: calls to the phone on the node the client reached', () => {
  it('are answered as fast as before (plain calls, and a call with progress on an SSE stream)', async () => {
    const [A] = tc.nodes;
    const phone = await tc.phone({ node: A, name: 'phone on A' });
    const token = await tc.key(phone.deviceId);
    const raw = await rawClient(A.url, token);
    const sdk = await connectClient(`${A.url}/mcp`, token);
    const progressCall = () =>
      sdk.client.callTool({ name: 'progress', arguments: { text: 'p', n: 5, delayMs: 5 } }, undefined, {
        onprogress: () => {},
        timeout: 30_000,
      });
    expect(outcome(await raw.call(A.url, 1, 'echo', { text: 'warm' }))).toBe('warm');
    await progressCall();

    redis.signal('SIGSTOP');
    try {
      // The node has noticed: Redis is down for it (node TTL 3 s since its last heartbeat).
      await waitFor(async () => !(await redisUp(A.adminPort)), 8000, 'A reporting Redis down');
      await sleep(200);

      const echoMs: number[] = [];
      for (let i = 0; i < 3; i++) {
        const t = Date.now();
        expect(outcome(await raw.call(A.url, 10 + i, 'echo', { text: `e${i}` }))).toBe(`e${i}`);
        echoMs.push(Date.now() - t);
      }
      const t = Date.now();
      const r = (await progressCall()) as { content: Array<{ text: string }> };
      const progressMs = Date.now() - t;
      expect(r.content[0].text).toBe('p done');
      console.log(
        `during the hang: local echo ${echoMs.join(', ')} ms; local call with 5 progress events ${progressMs} ms`,
      );
      // Unaffected: well under one Redis command timeout (1 s) each.
      expect(Math.max(...echoMs)).toBeLessThan(500);
      expect(progressMs).toBeLessThan(1500);
    } finally {
      redis.signal('SIGCONT');
      await raw.close();
      await sdk.client.close().catch(() => {});
    }
  }, 60_000);
});
