// The phone's JSON may carry line breaks between tokens (valid JSON, one message per text frame:
// docs/PROTOCOL.md "Framing"), but an SSE event's data is one line: a line break would cut the
// message apart in the client's SSE parser. EventStream.send (src/gateway/session-streams.ts)
// flattens each frame once, before it is buffered for resumption, and SseStream.send
// (src/gateway/sse.ts) makes every data line one line whatever its type. Checked with the official
// SDK client: a notification on the GET stream, and an answer ending a POST stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { waitFor, connectClient, type TestRelay } from '../helpers/relay.ts';
import { rawPhoneRelay, type RawPhoneRelay } from '../helpers/raw-phone-relay.ts';
import { ECHO_TOOL, type OpenSocket } from '../helpers/raw-device.ts';

let relay: TestRelay;
let token: string;
let s: OpenSocket;
let env: RawPhoneRelay | undefined;

beforeAll(async () => {
  ({ relay, token, s } = env = await rawPhoneRelay({
    tools: [ECHO_TOOL],
    capabilities: { tools: {}, logging: {} },
  }));
});
afterAll(() => env?.stop());

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
