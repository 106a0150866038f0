// An answer from the phone that is not one whole JSON object — cut short, or followed by
// anything but whitespace — is never forwarded to a client (src/protocol/frame.ts: a response
// is passed on only if its top-level braces close at its last non-whitespace byte, checked in
// one pass over its bytes, docs/decisions/0130-byte-level-requests.md). When its top-level id
// was read whole, that call fails at once with `relay_error`; digits at the very end of a cut
// frame may be the start of a longer id, so such a call ends at its deadline with `timeout`.
// Either way the client gets a JSON-RPC error, and the socket and its other calls go on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { connectClient, waitFor, type TestRelay } from '../helpers/relay.ts';
import { rawPhoneRelay, type RawPhoneRelay } from '../helpers/raw-phone-relay.ts';
import { type OpenSocket, type RawPhone } from '../helpers/raw-device.ts';
import { openSession, post, toolCall } from '../helpers/raw-mcp.ts';

let relay: TestRelay;
let phone: RawPhone;
let token: string;
let s: OpenSocket;
let env: RawPhoneRelay | undefined;
const TIMEOUT_MS = 2000;

beforeAll(async () => {
  // A short request timeout: a call whose id cannot be read ends at its deadline soon.
  ({ relay, phone, token, s } = env = await rawPhoneRelay({ args: ['--request-timeout-ms', String(TIMEOUT_MS)] }));
});
afterAll(() => env?.stop());

/** Posts a call and waits for the phone to receive it; `answer` gets the relay's id for it. */
async function callAnsweredWith(id: number, answer: (relayId: number) => string) {
  const h = await openSession(relay.mcpUrl, token);
  const n = s.frames.length;
  const started = Date.now();
  const call = post(relay.mcpUrl, { ...h, accept: 'application/json' }, toolCall(id, 'echo', {}));
  const req = await s.nextFrame((f) => f.method === 'tools/call' && s.frames.indexOf(f) >= n);
  s.ws.send(answer(req.id));
  const r = await call;
  return { ...r, ms: Date.now() - started };
}

function bodyOf(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return 'not JSON';
  }
}

describe('an answer from the phone that is not one whole JSON object', () => {
  it('cut after its id: never forwarded; the call ends at its deadline with a JSON-RPC error', async () => {
    const r = await callAnsweredWith(1, (id) => `{"result":{"content":[]},"jsonrpc":"2.0","id":${id}`);
    expect({ status: r.status, body: bodyOf(r.text) }).toMatchObject({
      status: 200,
      body: { jsonrpc: '2.0', id: 1, error: { code: -31002, data: { code: 'timeout' } } },
    });
  });

  it('followed by trailing data: never forwarded; the call fails at once with relay_error', async () => {
    const r = await callAnsweredWith(2, (id) => `{"result":{"content":[]},"jsonrpc":"2.0","id":${id}}}`);
    expect({ status: r.status, body: bodyOf(r.text) }).toMatchObject({
      status: 200,
      body: { jsonrpc: '2.0', id: 2, error: { code: -31000, data: { code: 'relay_error' } } },
    });
    expect(r.ms).toBeLessThan(TIMEOUT_MS / 2);
  });

  it('id first and cut inside its result: the call fails at once with relay_error', async () => {
    const r = await callAnsweredWith(
      3,
      (id) => `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"{\\"cut`,
    );
    expect({ status: r.status, body: bodyOf(r.text) }).toMatchObject({
      status: 200,
      body: { jsonrpc: '2.0', id: 3, error: { code: -31000, data: { code: 'relay_error' } } },
    });
    expect(r.ms).toBeLessThan(TIMEOUT_MS / 2);
  });

  it('leaves the socket and the other calls in flight on it alone', async () => {
    const h = await openSession(relay.mcpUrl, token);
    const n = s.frames.length;
    const headers = { ...h, accept: 'application/json' };
    const bad = post(relay.mcpUrl, headers, toolCall(10, 'echo', { n: 10 }));
    const good = post(relay.mcpUrl, headers, toolCall(11, 'echo', { n: 11 }));
    await waitFor(() => s.frames.slice(n).filter((f) => f.method === 'tools/call').length === 2);
    const calls = s.frames.slice(n).filter((f) => f.method === 'tools/call');
    const relayId = (clientId: number) => calls.find((f) => f.params.arguments.n === clientId).id;
    s.ws.send(`{"result":{"content":[]},"jsonrpc":"2.0","id":${relayId(10)}} trailing`);
    s.ws.send(JSON.stringify({ result: { content: [{ type: 'text', text: 'ok' }] }, jsonrpc: '2.0', id: relayId(11) }));
    const [b, g] = await Promise.all([bad, good]);
    expect(b.json).toMatchObject({ id: 10, error: { code: -31000, data: { code: 'relay_error' } } });
    expect(g.json).toMatchObject({ id: 11, result: { content: [{ type: 'text', text: 'ok' }] } });
    expect(relay.relay.node.ctx.hub.device(phone.deviceId)?.isReady).toBe(true);
  });

  it("fails the official SDK client's call with a JSON-RPC error, not a SyntaxError", async () => {
    const { client } = await connectClient(relay.mcpUrl, token);
    try {
      for (const [answer, code] of [
        [(id: number) => `{"result":{"content":[]},"jsonrpc":"2.0","id":${id}`, -31002],
        [(id: number) => `{"result":{"content":[]},"jsonrpc":"2.0","id":${id}}{"result":{}}`, -31000],
      ] as const) {
        const n = s.frames.length;
        const call = client.callTool({ name: 'echo', arguments: {} }).catch((e: unknown) => e);
        const req = await s.nextFrame((f) => f.method === 'tools/call' && s.frames.indexOf(f) >= n);
        s.ws.send(answer(req.id));
        const out = await call;
        expect(out).toBeInstanceOf(McpError);
        expect((out as McpError).code).toBe(code);
      }
    } finally {
      await client.close();
    }
  });
});
