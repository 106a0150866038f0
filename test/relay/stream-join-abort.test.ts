// A GET that aborts while its session's channel is still joining the phone's notifications
// (a Redis subscription) leaves nothing behind: no channel without a stream, no hub listener.
import { afterAll, beforeAll, it } from 'vitest';
import { request } from 'node:http';
import { startTestPhone, waitFor, type TestPhone } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { openSession } from '../helpers/raw-mcp.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { Redis } from 'ioredis';
import { REDIS_URL } from '../cluster/harness.ts';
import type { SessionChannel } from '../../src/gateway/session-streams.ts';

/** A channel with no stream connected and none kept for resumption: nothing will ever end it. */
const leaked = (c: SessionChannel) =>
  c.connected === 0 && (c as unknown as { detached?: unknown }).detached === undefined;

let nodes: TwoNodes;
let phone: TestPhone;

beforeAll(async () => {
  nodes = await startTwoNodes();
  phone = await startTestPhone(nodes.a, () => createEchoServer());
});
afterAll(async () => {
  await phone?.stop();
  await nodes?.stop();
});

/** Sends a GET and destroys the socket `afterMs` later (or as soon as anything comes back). */
function abortedGet(url: string, headers: Record<string, string>, afterMs: number): Promise<void> {
  return new Promise((resolve) => {
    const req = request(url, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.on('response', () => req.destroy());
    req.end();
    setTimeout(() => req.destroy(), afterMs);
  });
}

it('aborted GETs during the join leave no channel and no hub listener on the node', async () => {
  const key = await nodes.a.key(phone.deviceId);
  const hub = nodes.b.relay.node.ctx.hub;
  const redis = new Redis(REDIS_URL);
  // A large message ahead on node b's subscriber connection holds the reply to its SUBSCRIBE
  // back for a while (session lookups use the other connection): the join is slow, for real.
  const backlog = 'x'.repeat(8 * 1024 * 1024);
  const channel = `${nodes.prefix}ch:node:${nodes.b.relay.node.ctx.bus.nodeId}`;
  const mine = (sid: string) => hub.allStreams().filter((l) => l.sessionId === sid) as SessionChannel[];
  try {
    for (let i = 0; i < 30; i++) {
      const h = await openSession(nodes.b.mcpUrl, key.token);
      const sid = h['mcp-session-id'];
      void redis.publish(channel, backlog);
      await abortedGet(nodes.b.mcpUrl, h, 2 + (i % 15));
      // Once the join is over (the backlog drained), no stream-less channel of the session stays.
      await waitFor(() => mine(sid).filter(leaked).length === 0, 5000, `no leaked channel (attempt ${i})`);
    }
  } finally {
    redis.disconnect();
  }
});
