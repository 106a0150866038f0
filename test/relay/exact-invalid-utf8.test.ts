// A body that is not UTF-8 is not JSON text (RFC 8259 §8.1): the relay answers -32700 (HTTP 400,
// docs/PROTOCOL.md "Error codes") or forwards the client's text — it must not forward a different
// text, with U+FFFD put in place of the client's bytes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession } from '../helpers/raw-mcp.ts';

describe('a request body with invalid UTF-8', () => {
  let env: RawEnv;
  beforeAll(async () => {
    env = await oneNode();
  });
  afterAll(() => env?.stop());

  it('is refused with -32700, not forwarded with U+FFFD in place of the bytes', async () => {
    const h = { ...(await openSession(env.clientNode.mcpUrl, env.token)), accept: 'application/json' };
    const body = Buffer.concat([
      Buffer.from(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"m":"utf8","s":"',
      ),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}}}'),
    ]);
    const from = env.rawFrames.length;
    const r = fetch(env.clientNode.mcpUrl, { method: 'POST', headers: h, body });
    const fwd = await env.forwardedUnlessAnswered(
      (x) => x.method === 'tools/call' && x.params.arguments.m === 'utf8',
      r,
      from,
    );
    if (fwd) env.s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: fwd.f.id, result: { content: [] } }));
    const a = await r;
    const text = await a.text();
    expect(
      { forwarded: fwd?.raw, status: a.status },
      `the phone received a string the client never sent; client got ${a.status} ${text}`,
    ).toEqual({ forwarded: undefined, status: 400 });
  });
});
