// Sessions and streams are bounded per key: live sessions (least recently used evicted),
// initialize per key and per address (bus counters, so across nodes), GET streams per session
// and per key (the oldest closed), and phonebridge_sse_streams counts streams, not sessions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { getStream, openSession, post, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { metrics } from '../../src/metrics.ts';

const gauge = async () => (await metrics.sseStreams.get()).values[0]?.value ?? 0;

describe('defaults, one node', () => {
  let relay: TestRelay;
  let phone: TestPhone;
  beforeAll(async () => {
    relay = await startTestRelay();
    phone = await startTestPhone(relay, () => createEchoServer());
  });
  afterAll(async () => {
    await phone?.stop();
    await relay?.stop();
  });

  it('phonebridge_sse_streams counts each GET stream of a session', async () => {
    const key = await relay.key(phone.deviceId);
    const h = await openSession(relay.mcpUrl, key.token);
    const before = await gauge();
    const streams = await Promise.all(Array.from({ length: 5 }, () => getStream(relay.mcpUrl, h)));
    await waitFor(async () => (await gauge()) === before + 5, 3000, 'five streams counted');
    for (const s of streams) s.abort();
    await waitFor(async () => (await gauge()) === before, 3000, 'streams uncounted');
  });

  it('initialize is rate-limited per key (120 a minute by default); another key is not affected', async () => {
    const a = await relay.key(phone.deviceId);
    const b = await relay.key(phone.deviceId);
    const statuses: number[] = [];
    for (let i = 0; i < 121; i++) {
      const r = await fetch(relay.mcpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-api-key': a.token },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        }),
      });
      await r.text();
      statuses.push(r.status);
    }
    expect(statuses.slice(0, 120).every((s) => s === 200)).toBe(true);
    expect(statuses[120]).toBe(429);
    await openSession(relay.mcpUrl, b.token);
  });
});

function boundedSuite(name: string, make: () => Promise<{ nodes: [TestRelay, TestRelay]; stop(): Promise<void> }>) {
  describe(name, () => {
    let nodes: [TestRelay, TestRelay];
    let phone: TestPhone;
    let stop: () => Promise<void>;
    beforeAll(async () => {
      const m = await make();
      nodes = m.nodes;
      stop = () => m.stop();
      phone = await startTestPhone(nodes[0], () => createEchoServer());
    });
    afterAll(async () => {
      await phone?.stop();
      await stop?.();
    });
    const echo = (url: string, h: Record<string, string>) => post(url, h, toolCall(1, 'echo', { text: 'hi' }));

    it('a key’s sessions beyond its cap evict the least recently used, and its stream ends', async () => {
      const key = await nodes[0].key(phone.deviceId);
      const s1 = await openSession(nodes[0].mcpUrl, key.token);
      const s1Stream = await getStream(nodes[1].mcpUrl, s1);
      const s2 = await openSession(nodes[1].mcpUrl, key.token);
      const s3 = await openSession(nodes[0].mcpUrl, key.token);
      expect((await echo(nodes[1].mcpUrl, s1)).status).toBe(200); // s1 used: s2 is now the least recent
      const s4 = await openSession(nodes[1].mcpUrl, key.token);
      expect((await echo(nodes[0].mcpUrl, s2)).status).toBe(404);
      for (const s of [s1, s3, s4]) expect((await echo(nodes[1].mcpUrl, s)).status).toBe(200);
      const s5 = await openSession(nodes[0].mcpUrl, key.token); // evicts s1, whose stream is on the other node
      expect((await echo(nodes[1].mcpUrl, s1)).status).toBe(404);
      await waitFor(() => s1Stream.isEnded(), 5000, 'the evicted session’s stream ended');
      expect((await echo(nodes[1].mcpUrl, s5)).status).toBe(200);
    });

    it('streams per session and per key: a new one closes the oldest', async () => {
      const key = await nodes[0].key(phone.deviceId);
      const h = await openSession(nodes[1].mcpUrl, key.token);
      const g1 = await getStream(nodes[1].mcpUrl, h);
      const g2 = await getStream(nodes[1].mcpUrl, h);
      const g3 = await getStream(nodes[1].mcpUrl, h);
      await waitFor(() => g1.isEnded(), 3000, 'the oldest stream of the session closed');
      expect(g2.isEnded() || g3.isEnded()).toBe(false);
      const h2 = await openSession(nodes[1].mcpUrl, key.token);
      const g4 = await getStream(nodes[1].mcpUrl, h2); // the key now has 3 on this node: g2 goes
      await waitFor(() => g2.isEnded(), 3000, 'the key’s oldest stream closed');
      expect(g3.isEnded() || g4.isEnded()).toBe(false);
      g3.abort();
      g4.abort();
    });

    it('initialize is counted across nodes, per key and per address', async () => {
      // This address has opened 7 sessions in the tests above; its limit is 14, a key's 5.
      const a = await nodes[0].key(phone.deviceId);
      const b = await nodes[0].key(phone.deviceId);
      for (let i = 0; i < 5; i++) await openSession(nodes[i % 2].mcpUrl, a.token);
      await expect(openSession(nodes[1].mcpUrl, a.token)).rejects.toThrow('429');
      await openSession(nodes[0].mcpUrl, b.token);
      await expect(openSession(nodes[1].mcpUrl, b.token)).rejects.toThrow('429');
    });
  });
}

const flags = [
  '--max-sessions-per-key',
  '3',
  '--initialize-per-minute',
  '5',
  '--initialize-per-minute-per-address',
  '14',
  '--max-streams-per-session',
  '2',
  '--max-streams-per-key',
  '2',
];

boundedSuite('one node', async () => {
  const r = await startTestRelay(flags);
  return { nodes: [r, r], stop: () => r.stop() };
});
boundedSuite('two nodes over Redis', async () => {
  const t: TwoNodes = await startTwoNodes(flags);
  return { nodes: [t.a, t.b], stop: () => t.stop() };
});
