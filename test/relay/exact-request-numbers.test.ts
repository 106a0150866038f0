// docs/PROTOCOL.md "What the relay rewrites": everything not listed is forwarded byte for byte;
// a request with `_meta` is "parsed whole and re-serialised, with the same result as a JSON
// value". Numbers that JSON.parse cannot hold (an integer past 2^53, 1e400) must still reach the
// phone as the client wrote them: the relay is not the MCP server and must not round them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, twoNodes, rawMember, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession, post } from '../helpers/raw-mcp.ts';

const BIG = '12345678901234567890';

function call(id: number, args: string, withMeta: boolean): string {
  const meta = withMeta ? `,"_meta":{"progressToken":"tok-${id}"}` : '';
  return `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":${args}${meta}}}`;
}

/** Sends `body`, returns the raw frame the phone received for it (and answers it). */
async function phoneSees(env: RawEnv, body: string, marker: string, session?: Record<string, string>): Promise<string> {
  const h = session ?? (await openSession(env.clientNode.mcpUrl, env.token));
  const from = env.rawFrames.length;
  const answer = post(env.clientNode.mcpUrl, { ...h, accept: 'application/json' }, body);
  const { raw, f } = await env.nextRaw(
    (x) => x.method === 'tools/call' && JSON.stringify(x.params.arguments).includes(marker),
    from,
  );
  env.s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: f.id, result: { content: [] } }));
  await answer;
  return raw;
}

for (const topology of ['one node', 'two nodes (client on the node without the phone)'] as const) {
  describe(`numbers in a request's params, ${topology}`, () => {
    let env: RawEnv;
    beforeAll(async () => {
      env = topology === 'one node' ? await oneNode() : await twoNodes();
    });
    afterAll(() => env?.stop());

    it('regression net: a plain request (no _meta) right after another carries 2^64-ish and 1e400 unchanged', async () => {
      const h = await openSession(env.clientNode.mcpUrl, env.token);
      await phoneSees(env, call(10, '{"m":"warm-up"}', false), 'warm-up', h);
      const args = `{"m":"plain","big":${BIG},"inf":1e400}`;
      const raw = await phoneSees(env, call(1, args, false), 'plain', h);
      expect(rawMember(raw, 'arguments'), 'arguments as the phone received them').toBe(args);
    });

    it("a plain request (no _meta) on the phone's own URL /mcp/devices/<id> is forwarded byte for byte", async () => {
      // PROTOCOL.md "Fleets": the per-phone URL "behaves exactly like /mcp"; a device key works on it.
      const url = `${env.clientNode.url}/mcp/devices/${env.phone.deviceId}`;
      const h = await openSession(url, env.token);
      const from = env.rawFrames.length;
      const args = `{"m":"device-url","big":${BIG},"inf":1e400}`;
      const answer = post(url, { ...h, accept: 'application/json' }, call(6, args, false));
      const { raw, f } = await env.nextRaw(
        (x) => x.method === 'tools/call' && x.params.arguments.m === 'device-url',
        from,
      );
      env.s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: f.id, result: { content: [] } }));
      expect((await answer).status).toBe(200);
      expect(
        rawMember(raw, 'arguments'),
        'PROTOCOL.md: a plain request (no _meta) has its params forwarded byte for byte; here it was re-serialised',
      ).toBe(args);
    });

    if (topology !== 'one node') {
      it('a plain request (no _meta), first of a new session, is forwarded byte for byte', async () => {
        // The owner is remembered (a call just went through): only the session is new on this node.
        await phoneSees(env, call(11, '{"m":"warm-up-2"}', false), 'warm-up-2');
        const args = `{"m":"plain-new-session","big":${BIG},"inf":1e400}`;
        const raw = await phoneSees(env, call(5, args, false), 'plain-new-session');
        expect(
          rawMember(raw, 'arguments'),
          'PROTOCOL.md: a plain request (no _meta) has its params forwarded byte for byte; here it was re-serialised',
        ).toBe(args);
      });

      it('a plain request (no _meta) after 2.5 s idle in a warm session is forwarded byte for byte', async () => {
        const h = await openSession(env.clientNode.mcpUrl, env.token);
        await phoneSees(env, call(12, '{"m":"warm-up-3"}', false), 'warm-up-3', h);
        // OWNER_CACHE_MS (src/gateway/peer-directory.ts) is 2 s: past it the call takes the general path.
        await new Promise((r) => setTimeout(r, 2500));
        const args = `{"m":"plain-idle","big":${BIG},"inf":1e400}`;
        const raw = await phoneSees(env, call(4, args, false), 'plain-idle', h);
        expect(
          rawMember(raw, 'arguments'),
          'PROTOCOL.md: a plain request (no _meta) has its params forwarded byte for byte; here it was re-serialised',
        ).toBe(args);
      });
    }

    it('a request with _meta: an integer past 2^53 in its arguments reaches the phone unrounded', async () => {
      const args = `{"m":"meta-big","big":${BIG}}`;
      const raw = await phoneSees(env, call(2, args, true), 'meta-big');
      expect(
        rawMember(raw, 'arguments'),
        `the phone must get big:${BIG} as the client sent it, not rounded by JSON.parse/JSON.stringify`,
      ).toBe(args);
    });

    it('a request with _meta: 1e400 in its arguments does not reach the phone as null', async () => {
      const args = `{"m":"meta-inf","inf":1e400}`;
      const raw = await phoneSees(env, call(3, args, true), 'meta-inf');
      expect(
        rawMember(raw, 'arguments'),
        'the phone must get inf:1e400 (a valid JSON number), not null (JSON.stringify(Infinity))',
      ).toBe(args);
    });
  });
}
