// The phone reconnects while its first socket is still in its handshake (initialize not yet
// answered), with a client call waiting for that socket to be ready. The call never reached
// the phone; the phone is connected again at once: the call should run there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

let relay: TestRelay;
let phone: RawPhone;
let token: string;

async function handshake(s: OpenSocket): Promise<void> {
  await serveHandshake(s);
}

beforeAll(async () => {
  relay = await startTestRelay();
  phone = await pairRaw(relay.url, (await relay.pair()).code);
  token = (await relay.key(phone.deviceId)).token;
  // One good connection first, so that clients get sessions from its cached initialize result.
  const first = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  await handshake(first);
  await waitFor(() => relay.relay.node.ctx.hub.device(phone.deviceId)?.isReady === true);
  first.ws.close();
  await first.closed;
  await waitFor(() => relay.relay.node.ctx.hub.device(phone.deviceId) === undefined);
});
afterAll(async () => relay?.stop());

describe('a phone that reconnects during its handshake', () => {
  it("runs a call that waited for the first socket's handshake on the new socket", async () => {
    const { client } = await connectClient(relay.mcpUrl, token);
    try {
      // Socket A: authenticated, initialize never answered.
      const a = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
      await a.nextFrame((f) => f.method === 'initialize');
      const conn = () => relay.relay.node.ctx.hub.device(phone.deviceId);
      await waitFor(() => conn() !== undefined && !conn()!.isReady);
      const call = client
        .callTool({ name: 'echo', arguments: {} }, undefined, { timeout: 8000 })
        .catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 300)); // the call is waiting for A's handshake
      // The phone reconnects (socket B supersedes A) and completes its handshake there.
      const b = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
      expect((await a.closed).code).toBe(4001);
      await handshake(b);
      const req = await b.nextFrame((f) => f.method === 'tools/call', 5000).catch(() => undefined);
      if (req)
        b.ws.send(
          JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { content: [{ type: 'text', text: 'ran on B' }] } }),
        );
      const out = await call;
      expect(out instanceof Error ? `error: ${out.message}` : out).toEqual({
        content: [{ type: 'text', text: 'ran on B' }],
      });
      b.ws.close();
    } finally {
      await client.close();
    }
  }, 20_000);
});
