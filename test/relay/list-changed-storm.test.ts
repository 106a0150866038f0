// The relay's own requests stay under the cap: a storm of notifications/tools/list_changed
// costs a couple of catalog reloads, one at a time, ending on the latest surface; and what the
// relay answers from its cache (tools/list, initialize, unknown tools, scope refusals) never
// gets device_busy, even with every slot taken — on one node and across two.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectClient, startTestPhone, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes } from '../helpers/two-nodes.ts';

const STORM = 3000;

/** What the phone saw of the relay's tools/list requests. */
interface PhoneStats {
  lists: number;
  concurrentLists: number;
  maxConcurrentLists: number;
  version: number | string;
  /** The next tools/list answers late (with the surface as it was when asked). */
  slowNext?: boolean;
}

function stormPhone(stats: PhoneStats): Server {
  const server = new Server({ name: 'storm-phone', version: '1' }, { capabilities: { tools: { listChanged: true } } });
  const read = { 'phonebridge/scope': 'devices:read' };
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    stats.lists++;
    stats.maxConcurrentLists = Math.max(stats.maxConcurrentLists, ++stats.concurrentLists);
    const version = stats.version;
    const delay = stats.slowNext ? 400 : 5; // a real phone takes a moment to list
    stats.slowNext = false;
    await new Promise((r) => setTimeout(r, delay));
    stats.concurrentLists--;
    return {
      tools: [
        { name: 'storm', inputSchema: { type: 'object' }, _meta: read },
        { name: 'sleep', inputSchema: { type: 'object' }, _meta: read },
        { name: 'flip', inputSchema: { type: 'object' }, _meta: read },
        { name: 'act', inputSchema: { type: 'object' }, _meta: { 'phonebridge/scope': 'devices:act' } },
        { name: `v${version}`, inputSchema: { type: 'object' }, _meta: read },
      ],
    };
  });
  server.setRequestHandler(CallToolRequestSchema, async (r) => {
    if (r.params.name === 'storm') {
      // The surface changes with every notification; the relay must end on the last one.
      // In one burst, as a phone whose surface churns would; the last one names the final surface.
      const sent: Array<Promise<void>> = [];
      for (let i = 1; i <= STORM; i++) {
        stats.version = i;
        sent.push(server.sendToolListChanged());
      }
      await Promise.all(sent);
      return { content: [{ type: 'text', text: 'stormed' }] };
    }
    if (r.params.name === 'flip') {
      // Surface a, listed slowly; then surface b while that reload is still out.
      stats.version = 'a';
      stats.slowNext = true;
      await server.sendToolListChanged();
      await new Promise((res) => setTimeout(res, 100));
      stats.version = 'b';
      await server.sendToolListChanged();
      return { content: [{ type: 'text', text: 'flipped' }] };
    }
    if (r.params.name === 'sleep') await new Promise((res) => setTimeout(res, 1500));
    return { content: [{ type: 'text', text: r.params.name }] };
  });
  return server;
}

function suite(
  name: string,
  start: () => Promise<{ phoneNode: TestRelay; clientNode: TestRelay; stop(): Promise<void> }>,
) {
  describe(name, () => {
    let env: Awaited<ReturnType<typeof start>>;
    let deviceId: string;
    let full: string;
    let read: string;
    const stats: PhoneStats = { lists: 0, concurrentLists: 0, maxConcurrentLists: 0, version: 0 };
    let stopPhone: () => Promise<void>;
    beforeAll(async () => {
      env = await start();
      const phone = await startTestPhone(env.phoneNode, () => stormPhone(stats));
      deviceId = phone.deviceId;
      stopPhone = () => phone.stop();
      full = (await env.phoneNode.key(deviceId)).token;
      read = (await env.phoneNode.key(deviceId, ['devices:read'])).token;
    });
    afterAll(async () => {
      await stopPhone?.();
      await env?.stop();
    });

    it(`${STORM} list_changed: one reload at a time, a few in all, the latest surface, clients told`, async () => {
      const { client, transport } = await connectClient(env.clientNode.mcpUrl, full);
      let told = 0;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
      await waitFor(
        () => env.clientNode.relay.node.ctx.hub.allStreams().some((l) => l.sessionId === transport.sessionId),
        5000,
        'GET stream',
      );
      const conn = env.phoneNode.relay.node.ctx.hub.device(deviceId)!;
      let peak = 0;
      const sampler = setInterval(() => (peak = Math.max(peak, conn.inFlight)), 1);
      const listsBefore = stats.lists;
      await client.callTool({ name: 'storm', arguments: {} });
      await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === `v${STORM}`), 10_000, 'v3000');
      await waitFor(() => told > 0, 5000, 'list_changed at the client');
      clearInterval(sampler);
      if (process.env.PB_TEST_VERBOSE)
        console.log(
          `${STORM} list_changed: ${stats.lists - listsBefore} reloads, ${told} told, peak in flight ${peak}`,
        );
      expect(stats.maxConcurrentLists).toBe(1);
      // Each reload coalesces everything that arrived while it ran: a handful, never one per notification.
      expect(stats.lists - listsBefore).toBeLessThan(STORM / 30);
      expect(told).toBeLessThan(STORM / 30);
      // The storm call itself plus at most one reload of the relay's own.
      expect(peak).toBeLessThanOrEqual(2);
      await client.close();
    });

    it('the latest surface wins over a slow reload that answers last', async () => {
      const { client } = await connectClient(env.clientNode.mcpUrl, full);
      await client.callTool({ name: 'flip', arguments: {} });
      const names = async () => (await client.listTools()).tools.map((t) => t.name);
      await waitFor(async () => (await names()).includes('vb'), 10_000, 'surface b');
      await new Promise((r) => setTimeout(r, 800)); // past the slow answer for surface a
      expect(await names()).toContain('vb');
      expect(await names()).not.toContain('va');
      await client.close();
    });

    it('with every slot taken, answers from the cache and refusals are not device_busy', async () => {
      const { client } = await connectClient(env.clientNode.mcpUrl, full);
      const slow = [1, 2].map(() => client.callTool({ name: 'sleep', arguments: {} }));
      const conn = env.phoneNode.relay.node.ctx.hub.device(deviceId)!;
      await waitFor(() => conn.inFlight === 2, 5000, 'two calls in flight');
      // The cap (2) is reached: a call that needs the phone is refused...
      const busy = await client.callTool({ name: 'storm', arguments: {} }).catch((e) => e);
      expect(busy.code).toBe(-31009);
      // ...but what the relay answers itself is not.
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('sleep');
      const unknown = await client.callTool({ name: 'no-such-tool', arguments: {} }).catch((e) => e);
      expect(unknown.code).toBe(-32602);
      const other = await connectClient(env.clientNode.mcpUrl, read); // initialize, from the cache
      const refused = await other.client.callTool({ name: 'act', arguments: {} }).catch((e) => e);
      expect(String(refused)).toMatch(/403|insufficient_scope|-31008/);
      expect((await other.client.listTools()).tools.map((t) => t.name)).not.toContain('act');
      await Promise.all(slow);
      await other.client.close();
      await client.close();
    });
  });
}

suite('one node', async () => {
  const relay = await startTestRelay(['--max-in-flight', '2']);
  return { phoneNode: relay, clientNode: relay, stop: () => relay.stop() };
});

suite('two nodes over Redis (phone on a, client on b)', async () => {
  const nodes = await startTwoNodes(['--max-in-flight', '2']);
  return { phoneNode: nodes.a, clientNode: nodes.b, stop: () => nodes.stop() };
});
