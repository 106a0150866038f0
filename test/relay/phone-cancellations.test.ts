// notifications/cancelled from the phone. MCP: its requestId "MUST correspond to the ID of a
// request previously issued in the same direction" (the SDK's CancelledNotificationSchema), i.e.
// one of the phone's own requests, in the phone's id space, never a relay id: it cancels no
// client's call (src/gateway/device-connection.ts, onFrame).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestRelay } from '../helpers/relay.ts';
import { rawPhoneRelay, type RawPhoneRelay } from '../helpers/raw-phone-relay.ts';
import type { OpenSocket } from '../helpers/raw-device.ts';
import { openSession, post, toolCall } from '../helpers/raw-mcp.ts';

let relay: TestRelay;
let token: string;
let s: OpenSocket;
let env: RawPhoneRelay | undefined;

beforeAll(async () => {
  ({ relay, token, s } = env = await rawPhoneRelay());
});
afterAll(() => env?.stop());

describe('the phone cancelling one of its own requests', () => {
  it("does not cancel a client's call that happens to hold the same number as relay id", async () => {
    const h = await openSession(relay.mcpUrl, token);
    const call = post(relay.mcpUrl, h, toolCall('client-call', 'echo', {}));
    const req = await s.nextFrame((f) => f.method === 'tools/call');
    // The phone (as an MCP server) sends a request of its own; its ids are its own counter,
    // which here reaches the same number as the relay id of the client's call.
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, method: 'roots/list' }));
    await s.nextFrame((f) => f.id === req.id && f.error !== undefined); // the relay refuses it (-32601)
    // ...and then gives up on it (an SDK request aborted or timed out sends exactly this).
    s.ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: req.id, reason: 'aborted' },
      }),
    );
    await new Promise((r) => setTimeout(r, 200));
    // The tool call is still the phone's to answer.
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { content: [{ type: 'text', text: 'done' }] } }));
    const r = await call;
    expect(r.json).toEqual({
      jsonrpc: '2.0',
      id: 'client-call',
      result: { content: [{ type: 'text', text: 'done' }] },
    });
  });
});
