// The phone's socket goes away, or is superseded by a newer one, while calls of several client
// sessions are in flight on it, on every client path (the fast path, the general path with a
// progress stream, a 2025-03-26 batch). Each ends at once with the documented error
// (docs/PROTOCOL.md: device_offline; superseded for 4001), nothing hangs, nothing is left.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { connectClient, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import {
  challenge,
  openSocket,
  pairRaw,
  serveHandshake,
  signedHeaders,
  type OpenSocket,
  type RawPhone,
} from '../helpers/raw-device.ts';
import { openSession, post, toolCall } from '../helpers/raw-mcp.ts';

let relay: TestRelay;
let phone: RawPhone;
let token: string;

async function connectPhone(): Promise<OpenSocket> {
  const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  await serveHandshake(s);
  await waitFor(() => {
    const c = relay.relay.node.ctx.hub.device(phone.deviceId);
    return c !== undefined && c.isReady && !c.closed;
  });
  return s;
}

beforeAll(async () => {
  relay = await startTestRelay();
  phone = await pairRaw(relay.url, (await relay.pair()).code);
  token = (await relay.key(phone.deviceId)).token;
});
afterAll(async () => relay?.stop());

/** Four calls on four paths, all forwarded to the phone `s`; their outcomes once settled. */
async function callsInFlight(s: OpenSocket) {
  const fastSession = await openSession(relay.mcpUrl, token);
  const batchSession = await openSession(relay.mcpUrl, token, '2025-03-26');
  const { client } = await connectClient(relay.mcpUrl, token);
  const before = s.frames.filter((f) => f.method === 'tools/call').length;
  const outcomes = Promise.all([
    post(relay.mcpUrl, fastSession, toolCall(1, 'echo', {})).then((r) => r.json.error?.data?.code),
    post(
      relay.mcpUrl,
      batchSession,
      JSON.stringify([JSON.parse(toolCall('a', 'echo', {})), JSON.parse(toolCall('b', 'echo', {}))]),
    ).then((r) => (r.json as any[]).map((m) => m.error?.data?.code)),
    client.callTool({ name: 'echo', arguments: {} }, undefined, { onprogress: () => {} }).then(
      () => 'answered',
      (e: unknown) => (e instanceof McpError ? (e.data as any)?.code : String(e)),
    ),
  ]);
  await waitFor(
    () => s.frames.filter((f) => f.method === 'tools/call').length >= before + 4,
    5000,
    'four calls at the phone',
  );
  return { outcomes, close: () => client.close() };
}

describe('calls in flight when the phone socket goes', () => {
  it('a dropped socket (1006): every call of every session ends with device_offline at once', async () => {
    const s = await connectPhone();
    const conn = relay.relay.node.ctx.hub.device(phone.deviceId)!;
    const { outcomes, close } = await callsInFlight(s);
    const t0 = Date.now();
    s.ws.terminate();
    expect(await outcomes).toEqual(['device_offline', ['device_offline', 'device_offline'], 'device_offline']);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(conn.inFlight).toBe(0);
    await close();
  });

  it('a newer socket (4001): the old one’s calls end with superseded, the new one serves', async () => {
    const s = await connectPhone();
    const old = relay.relay.node.ctx.hub.device(phone.deviceId)!;
    const { outcomes, close } = await callsInFlight(s);
    const s2 = connectPhone();
    expect((await s.closed).code).toBe(4001);
    expect(await outcomes).toEqual(['superseded', ['superseded', 'superseded'], 'superseded']);
    expect(old.inFlight).toBe(0);
    const b = await s2;
    const h = await openSession(relay.mcpUrl, token);
    const again = post(relay.mcpUrl, h, toolCall(9, 'echo', {}));
    const req = await b.nextFrame((f) => f.method === 'tools/call');
    b.ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { content: [] } }));
    expect((await again).json).toEqual({ jsonrpc: '2.0', id: 9, result: { content: [] } });
    b.ws.close();
    await close();
  });
});
