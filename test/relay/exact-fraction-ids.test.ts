// docs/PROTOCOL.md rewrite 2: "A client's id is a string or an integer within ±(2^53 − 1) ...;
// any other number (a fraction, or an integer that a JSON parser would round) is -32600
// (HTTP 400), since the answer could not carry it back unchanged." A fraction that a JSON
// parser rounds to an integer is still a fraction.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession, post } from '../helpers/raw-mcp.ts';

describe('fractional ids', () => {
  let env: RawEnv;
  beforeAll(async () => {
    env = await oneNode();
  });
  afterAll(() => env?.stop());

  for (const id of ['1.0000000000000001', '4503599627370496.5']) {
    it(`id ${id} (a fraction JSON.parse rounds to an integer) is refused, not answered under another id`, async () => {
      const h = { ...(await openSession(env.clientNode.mcpUrl, env.token)), accept: 'application/json' };
      const from = env.rawFrames.length;
      const r = post(env.clientNode.mcpUrl, h, `{"jsonrpc":"2.0","id":${id},"method":"ping"}`);
      // If the relay forwards it, answer as the phone would.
      const fwd = await env.forwardedUnlessAnswered((x) => x.method === 'ping', r, from);
      if (fwd) env.s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: fwd.f.id, result: {} }));
      const a = await r;
      expect(
        { status: a.status, code: a.json?.error?.code, body: a.text },
        `the answer could not carry id ${id} back unchanged (it came back as ${JSON.stringify(a.json?.id)})`,
      ).toMatchObject({ status: 400, code: -32600 });
    });
  }
});
