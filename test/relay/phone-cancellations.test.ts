// notifications/cancelled from the phone. MCP: its requestId "MUST correspond to the ID of a
// request previously issued in the same direction" (the SDK's CancelledNotificationSchema), i.e.
// one of the phone's own requests, in the phone's id space, never a relay id: it cancels no
// client's call (src/gateway/device-connection.ts, onFrame).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import {
  challenge,
  openSocket,
  pairRaw,
  signedHeaders,
  type OpenSocket,
  type RawPhone,
} from '../helpers/raw-device.ts';
import { openSession, post, toolCall } from '../helpers/raw-mcp.ts';

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
        capabilities: { tools: {} },
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
