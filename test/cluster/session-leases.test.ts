// Session leases (docs/decisions/0133-session-leases.md): a node serves a session it touched
// lately from memory, renewing it in Redis now and then. Two `phonebridge serve` processes on
// one Redis and one Postgres, the phone on node A, clients on node B: calls on B do not touch
// Redis per call, and a session that ends anywhere (DELETE, the per-key cap, idle expiry) is
// refused on the other node at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  outcome,
  PROTOCOL,
  rawClient,
  sleep,
  startTestCluster,
  type ClusterPhone,
  type TestCluster,
} from './harness.ts';
import type { ClusterNode } from '../../services/cluster.ts';

const IDLE_MS = 1_500;
const MAX_SESSIONS = 2;

let tc: TestCluster;
let A: ClusterNode, B: ClusterNode;
let phone: ClusterPhone;
let token: string;

beforeAll(async () => {
  tc = await startTestCluster({
    nodes: 2,
    serveArgs: ['--session-idle-ms', String(IDLE_MS), '--max-sessions-per-key', String(MAX_SESSIONS)],
  });
  [A, B] = tc.nodes;
  phone = await tc.phone({ node: A, name: 'phone on A' });
  token = await tc.key(phone.deviceId);
  expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);
}, 90_000);

afterAll(async () => {
  await tc?.stop();
}, 60_000);

/** Redis commands node B has issued so far (phonebridge_redis_command_duration_seconds_count). */
async function redisCommands(node: ClusterNode): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${node.adminPort}/metrics`)).text();
  return Number(/^phonebridge_redis_command_duration_seconds_count (\d+)$/m.exec(text)?.[1] ?? NaN);
}

const listTools = { jsonrpc: '2.0', id: 7, method: 'tools/list' };

describe('a session leased on node B', () => {
  it('serves calls without a session touch per call: a renewal now and then', async () => {
    const raw = await rawClient(B.url, token, { maxSockets: 1 });
    const cold = await redisCommands(B);
    expect(outcome(await raw.call(B.url, 1, 'echo', { text: 'warm' }))).toBe('warm'); // takes the lease
    const before = await redisCommands(B);
    expect(before).toBeGreaterThan(cold); // the lease, the owner lookup: the count moves
    const calls = 40;
    const started = Date.now();
    for (let i = 0; i < calls; i++)
      expect(outcome(await raw.call(B.url, 10 + i, 'echo', { text: `c${i}` }))).toBe(`c${i}`);
    const used = (await redisCommands(B)) - before;
    const ms = Date.now() - started;
    // Without the lease: a session touch per call (40). With it: the renewals (every 2 s while
    // calls come) and the node's heartbeats (every second), however long the calls took on a
    // loaded machine. The requests' own publishes go without a reply, so this count leaves them
    // out (docs/decisions/0225-quiet-requests.md).
    expect(used).toBeLessThanOrEqual(Math.ceil(ms / 2000) + Math.ceil(ms / 1000) + 2);
    expect(used).toBeLessThan(calls / 2);
    await raw.close();
  });

  it('is refused on B immediately after a DELETE on A', async () => {
    const raw = await rawClient(B.url, token);
    for (let i = 0; i < 3; i++) expect(outcome(await raw.call(B.url, i, 'echo', { text: 'on B' }))).toBe('on B');
    expect(outcome(await raw.call(A.url, 5, 'echo', { text: 'on A' }))).toBe('on A');
    const del = await fetch(`${A.url}/mcp`, {
      method: 'DELETE',
      headers: { 'x-api-key': token, 'mcp-session-id': raw.sessionId, 'mcp-protocol-version': PROTOCOL },
    });
    expect(del.status).toBe(200);
    expect((await raw.post(B.url, listTools)).status).toBe(404);
    expect(
      (
        await raw.post(B.url, {
          jsonrpc: '2.0',
          id: 8,
          method: 'tools/call',
          params: { name: 'echo', arguments: { text: 'x' } },
        })
      ).status,
    ).toBe(404);
    expect((await raw.post(A.url, listTools)).status).toBe(404);
    await raw.close();
  });

  it('is refused on B immediately after the per-key cap evicted it on A', async () => {
    const old = await rawClient(B.url, token);
    expect(outcome(await old.call(B.url, 1, 'echo', { text: 'leased' }))).toBe('leased');
    // MAX_SESSIONS newer sessions of the same key, created on A: the least recently used (old) goes.
    const newer = [];
    for (let i = 0; i < MAX_SESSIONS; i++) {
      await sleep(5); // distinct expiries, so the oldest is the one evicted
      newer.push(await rawClient(A.url, token));
    }
    expect((await old.post(B.url, listTools)).status).toBe(404);
    for (const c of newer) expect(outcome(await c.call(B.url, 2, 'echo', { text: 'new' }))).toBe('new');
    await Promise.all([old.close(), ...newer.map((c) => c.close())]);
  });

  it('is renewed while in use, so an active session outlives its idle time; it expires everywhere once idle', async () => {
    const raw = await rawClient(B.url, token);
    const until = Date.now() + IDLE_MS * 3;
    for (let i = 0; Date.now() < until; i++) {
      expect(outcome(await raw.call(B.url, i, 'echo', { text: `t${i}` }))).toBe(`t${i}`);
      await sleep(50);
    }
    expect(await tc.redis.pttl(`${tc.prefix}sess:${raw.sessionId}`)).toBeGreaterThan(0);
    await sleep(IDLE_MS + 200);
    expect((await raw.post(B.url, listTools)).status).toBe(404);
    expect((await raw.post(A.url, listTools)).status).toBe(404);
    await raw.close();
  });
});
