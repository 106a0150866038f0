// The phone's JSON may carry line breaks between tokens (valid JSON, one message per text frame:
// docs/PROTOCOL.md "Framing"), but an SSE event's data is one line: a line break would cut the
// message apart in the client's SSE parser. EventStream.send (src/gateway/session-streams.ts)
// flattens each frame once, before it is buffered for resumption, and SseStream.send
// (src/gateway/sse.ts) makes every data line one line whatever its type. Checked with the official
// SDK client: a notification on the GET stream, and an answer ending a POST stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startTestRelay, waitFor, connectClient, type TestRelay } from '../helpers/relay.ts';
import {
  challenge,
  openSocket,
  pairRaw,
  signedHeaders,
  type OpenSocket,
  type RawPhone,
} from '../helpers/raw-device.ts';

let relay: TestRelay;
let phone: RawPhone;
let token: string;
let s: OpenSocket;
const TOOLS = [{ name: 'echo', inputSchema: { type: 'object' }, _meta: { 'phonebridge/scope': 'devices:act' } }];

beforeAll(async () => {
  relay = await startTestRelay();
  phone = await pairRaw(relay.url, (await relay.pair()).code);
  token = (await relay.key(phone.deviceId)).token;
  s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  const init = await s.nextFrame((f) => f.method === 'initialize');
  s.ws.send(
    JSON.stringify({
      jsonrpc: '2.0',
      id: init.id,
      result: {
        protocolVersion: init.params.protocolVersion,
        capabilities: { tools: {}, logging: {} },
        serverInfo: { name: 'raw', version: '1' },
      },
    }),
  );
  const list = await s.nextFrame((f) => f.method === 'tools/list');
  s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: list.id, result: { tools: TOOLS } }));
  await waitFor(() => relay.relay.node.ctx.hub.device(phone.deviceId)?.isReady === true);
});
afterAll(async () => {
  s?.ws.close();
  await relay?.stop();
});

describe('phone JSON with line breaks on SSE streams', () => {
  it('a pretty-printed notification reaches the GET stream of the official SDK client intact', async () => {
    const { client } = await connectClient(relay.mcpUrl, token);
    try {
      const errors: string[] = [];
      client.onerror = (e) => void errors.push(String(e));
      const got: string[] = [];
      client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void got.push(String(n.params.data)));
      // The SDK opens its GET stream after initialize: wait until the relay has it attached.
      await waitFor(
        () => relay.relay.node.ctx.hub.allStreams().some((l: any) => (l.streams?.length ?? 0) > 0),
        5000,
        'the GET stream',
      );
      const note = (data: string, space?: number) =>
        JSON.stringify(
          { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data } },
          null,
          space,
        );
      s.ws.send(note('first'));
      s.ws.send(note('pretty', 2));
      s.ws.send(note('last'));
      await waitFor(() => got.includes('last'), 5000, 'the last notification');
      await waitFor(() => got.length >= 3, 1000).catch(() => {});
      expect({ got, errors }).toEqual({ got: ['first', 'pretty', 'last'], errors: [] });
    } finally {
      await client.close();
    }
  });

  it('a pretty-printed answer on a POST SSE stream (a call with a progress token) completes the call', async () => {
    const { client } = await connectClient(relay.mcpUrl, token);
    try {
      const call = client
        .callTool({ name: 'echo', arguments: {} }, undefined, { onprogress: () => {}, timeout: 5000 })
        .catch((e: unknown) => e);
      const req = await s.nextFrame((f) => f.method === 'tools/call' && f.params?._meta?.progressToken !== undefined);
      s.ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/progress',
          params: { progressToken: req.params._meta.progressToken, progress: 1 },
        }),
      );
      // Valid JSON, one message in one text frame, with line breaks between its tokens.
      s.ws.send(
        JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { content: [{ type: 'text', text: 'done' }] } }, null, 2),
      );
      const out = await call;
      expect(out instanceof Error ? `error: ${out.message}` : out).toEqual({
        content: [{ type: 'text', text: 'done' }],
      });
    } finally {
      await client.close();
    }
  }, 15_000);
});
