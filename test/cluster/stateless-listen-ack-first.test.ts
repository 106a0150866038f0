// subscriptions/listen: the acknowledgment comes first, also while the phone is announcing
// changes and the listening node is still subscribing to the phone's channel on Redis.
// Spec 2026-07-28, basic/patterns/subscriptions, "Acknowledgment": "The server MUST send
// `notifications/subscriptions/acknowledged` as the first message … and MUST NOT send any
// notification on the subscription before it." docs/PROTOCOL.md ("Revision 2026-07-28"):
// "`subscriptions/listen` is answered with an SSE stream: first
// `notifications/subscriptions/acknowledged` …, then the opted-in list-changed notifications";
// what the phone sends meanwhile is held and written after it, not dropped.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { startTestPhone, waitFor, sseMessages, type TestPhone } from '../helpers/relay.ts';
import { listenRequest, STATELESS_META, STATELESS_REVISION } from '../helpers/raw-mcp.ts';

let t: TwoNodes;
let phone: TestPhone;
let token: string;
let flooding = true;

/** A phone whose `flood` tool announces prompt list changes until the test ends. */
function floodingServer(): McpServer {
  const server = new McpServer(
    { name: 'flood-phone', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true }, prompts: { listChanged: true } } },
  );
  server.registerTool(
    'flood',
    {
      description: 'Announces prompt list changes until told to stop',
      inputSchema: {},
      _meta: { 'phonebridge/scope': 'devices:read' },
    },
    async () => {
      while (flooding) {
        for (let i = 0; i < 50; i++) await server.server.notification({ method: 'notifications/prompts/list_changed' });
        await new Promise((r) => setImmediate(r));
      }
      return { content: [{ type: 'text', text: 'done' }] };
    },
  );
  return server;
}

beforeAll(async () => {
  t = await startTwoNodes();
  phone = await startTestPhone(t.a, floodingServer);
  token = (await t.a.key(phone.deviceId)).token;
}, 30_000);
afterAll(async () => {
  flooding = false;
  await phone?.stop();
  await t?.stop();
});

describe('2026-07-28 listen on another node while the phone is announcing changes', () => {
  it('every listen stream opens with its acknowledgment, then the notifications follow', async () => {
    // The phone (on node a) announces until the test ends: a call that runs that long.
    void fetch(t.a.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        'x-api-key': token,
        'mcp-protocol-version': STATELESS_REVISION,
        'mcp-method': 'tools/call',
        'mcp-name': 'flood',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'flood', arguments: {}, _meta: STATELESS_META },
      }),
    }).catch(() => {});
    const firsts: string[] = [];
    const seconds: string[] = [];
    const hub = t.b.relay.node.ctx.hub;
    for (let trial = 0; trial < 40; trial++) {
      const r = await fetch(t.b.mcpUrl, listenRequest(token, { promptsListChanged: true }));
      const reader = r.body!.getReader();
      let text = '';
      while (sseMessages(text).length < 2) {
        const c = await reader.read();
        if (c.done) break;
        text += new TextDecoder().decode(c.value);
      }
      const [first, second] = sseMessages(text);
      firsts.push(first?.method ?? '(none)');
      seconds.push(second?.method ?? '(none)');
      await reader.cancel().catch(() => {});
      // The next trial is again node b's first listener: a fresh Redis subscription.
      await waitFor(() => hub.allStreams().length === 0, 3000, 'listener gone');
      await new Promise((r) => setTimeout(r, 20));
    }
    flooding = false;
    const early = firsts.filter((m) => m !== 'notifications/subscriptions/acknowledged');
    expect({ trials: firsts.length, notAckFirst: early.length, sample: early.slice(0, 3) }).toEqual({
      trials: 40,
      notAckFirst: 0,
      sample: [],
    });
    // The flood reaches each stream after its acknowledgment.
    expect(new Set(seconds)).toEqual(new Set(['notifications/prompts/list_changed']));
  }, 20_000);
});
