// A cross-node request that reaches the phone's node while the phone's new socket is still in
// its handshake waits there for the phone's initialize (ServedRequests.untilReady). It is in the
// owner's table meanwhile, so the origin's cancel, arriving during that wait, is kept: the
// request never starts on the phone, and nothing is left behind on either node
// (docs/decisions/0243-requests-on-the-bus-belong-to-one-process.md). Without the cancel, the
// same request starts once the phone is ready. Two relay nodes in this process
// (test/helpers/two-nodes.ts), a raw phone on A played frame by frame, the client on B.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { waitFor } from '../helpers/relay.ts';
import {
  challenge,
  openSocket,
  pairRaw,
  serveHandshake,
  signedHeaders,
  type OpenSocket,
  type RawPhone,
} from '../helpers/raw-device.ts';
import { openSession, toolCall } from '../helpers/raw-mcp.ts';

let nodes: TwoNodes;
let phone: RawPhone;
let token: string;
let socket: OpenSocket | undefined;

beforeAll(async () => {
  nodes = await startTwoNodes(['--request-timeout-ms', '5000']);
  phone = await pairRaw(nodes.a.url, (await nodes.a.pair()).code);
  token = (await nodes.a.key(phone.deviceId)).token;
  // A first socket fills the relay's cache of the phone's initialize: clients initialize from it.
  socket = await connect();
  await serveHandshake(socket);
  await waitFor(() => hubA().device(phone.deviceId)?.isReady === true, 5000, 'phone ready');
}, 60_000);

afterAll(async () => {
  socket?.ws.close();
  await nodes?.stop();
}, 60_000);

const hubA = () => nodes.a.relay.node.ctx.hub;
const servedOnA = () => (nodes.a.relay.node.ctx.router as any).served.served.size as number;
const remoteOnB = () => (nodes.b.relay.node.ctx.router as any).remote.pending.size as number;

async function connect(): Promise<OpenSocket> {
  return openSocket(nodes.a.url, signedHeaders(phone, await challenge(nodes.a.url, phone.deviceId)));
}

/** The phone reconnects: its new socket on A has the relay's initialize and no answer yet. */
async function reconnectHeld(): Promise<OpenSocket> {
  const old = socket!;
  old.ws.close();
  await old.closed;
  socket = await connect();
  await socket.nextFrame((f) => f.method === 'initialize');
  const conn = hubA().device(phone.deviceId);
  expect(conn?.isReady).toBe(false);
  await waitFor(
    async () =>
      (await nodes.b.relay.node.ctx.bus.ownerOf(phone.deviceId))?.nodeId === nodes.a.relay.node.ctx.config.nodeId,
    5000,
    'A owns the phone again',
  );
  return socket;
}

const toolCalls = (s: OpenSocket) => s.frames.filter((f) => f.method === 'tools/call');

describe('a cross-node request waiting for the phone to be ready', () => {
  it('cancelled by its client during that wait: it never reaches the phone, and both nodes forget it', async () => {
    const h = await openSession(nodes.b.mcpUrl, token);
    const s = await reconnectHeld();
    const answer = fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: h,
      body: toolCall('c1', 'echo', { text: 'no' }),
    }).then((r) => r.text());
    await waitFor(() => servedOnA() === 1, 5000, 'the request waits on A');
    const note = await fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c1' } }),
    });
    expect(note.status).toBe(202);
    expect(await answer).toMatch(/"cancelled"/);
    // The cancel has reached A (its served request is marked) before the phone becomes ready.
    await waitFor(
      () => [...(nodes.a.relay.node.ctx.router as any).served.served.entries()].every(([, v]: any) => v.cancelledEarly),
      5000,
      'the cancel reached A',
    );
    await serveHandshake(s);
    await waitFor(() => hubA().device(phone.deviceId)?.isReady === true, 5000, 'phone ready');
    await waitFor(() => servedOnA() === 0 && remoteOnB() === 0, 3000, 'both tables empty');
    // Nothing went to the phone after its handshake: give a started call time to show.
    await new Promise((r) => setTimeout(r, 300));
    expect(toolCalls(s)).toEqual([]);
    expect(hubA().device(phone.deviceId)?.inFlight).toBe(0);
  });

  it('not cancelled: the same request starts once the phone is ready, and is answered', async () => {
    const h = await openSession(nodes.b.mcpUrl, token);
    const s = await reconnectHeld();
    const answer = fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: { ...h, accept: 'application/json' },
      body: toolCall('c2', 'echo', { text: 'yes' }),
    }).then((r) => r.json());
    await waitFor(() => servedOnA() === 1, 5000, 'the request waits on A');
    expect(toolCalls(s)).toEqual([]);
    await serveHandshake(s);
    const call = await s.nextFrame((f) => f.method === 'tools/call');
    expect(call.params.name).toBe('echo');
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: { content: [{ type: 'text', text: 'yes' }] } }));
    expect(await answer).toMatchObject({ id: 'c2', result: { content: [{ text: 'yes' }] } });
    await waitFor(() => servedOnA() === 0 && remoteOnB() === 0, 3000, 'both tables empty');
  });
});
