// docs/PROTOCOL.md "What the relay rewrites" rewrite 3: notifications/progress from the phone
// "gets the client's token back" — that token is the only rewrite; "Everything not in this list
// is forwarded byte for byte". Client notifications get only the caller context (rewrite 4).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, twoNodes, rawMember, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession, openStream } from '../helpers/raw-mcp.ts';

const BIG = '12345678901234567890';

/** Starts a tools/call with `token` (JSON text) as its progress token on an SSE POST; returns the phone's frame and the stream. */
async function callWithProgress(env: RawEnv, token: string, marker: string) {
  const h = await openSession(env.clientNode.mcpUrl, env.token);
  const from = env.rawFrames.length;
  const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"m":"${marker}"},"_meta":{"progressToken":${token}}}}`;
  const stream = await openStream(env.clientNode.mcpUrl, { method: 'POST', headers: h, body });
  const { f } = await env.nextRaw((x) => x.method === 'tools/call' && x.params.arguments.m === marker, from);
  return { stream, relayId: f.id as number, relayToken: f.params._meta.progressToken };
}

/** The progress event of a POST stream, once the stream has ended. */
async function progressLine(stream: { ended: Promise<unknown>; text(): string }): Promise<string> {
  await stream.ended;
  const line = stream
    .text()
    .split('\n')
    .find((l) => l.includes('notifications/progress'));
  expect(line, 'a progress event on the POST stream').toBeDefined();
  return line!;
}

for (const topology of ['one node', 'two nodes (client on the node without the phone)'] as const) {
  describe(`notifications through the relay, ${topology}`, () => {
    let env: RawEnv;
    beforeAll(async () => {
      env = topology === 'one node' ? await oneNode() : await twoNodes();
    });
    afterAll(() => env?.stop());

    it("the phone's notifications/progress reaches the client byte for byte apart from the token", async () => {
      const { stream, relayId, relayToken } = await callWithProgress(env, '"tok"', 'progress-bytes');
      const params = `{"progressToken":${JSON.stringify(relayToken)},"progress":1,"total":${BIG},"message":"m"}`;
      env.s.ws.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":${params}}`);
      env.s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: relayId, result: { content: [] } }));
      const line = await progressLine(stream);
      expect(
        rawMember(line, 'params'),
        `progress params as the phone sent them (total:${BIG}, not rounded), only the token changed back to "tok"`,
      ).toBe(`{"progressToken":"tok","progress":1,"total":${BIG},"message":"m"}`);
    });

    it("a client's integer progress token past 2^53 comes back on its progress as the client wrote it", async () => {
      const { stream, relayId, relayToken } = await callWithProgress(env, BIG, 'progress-big-token');
      env.s.ws.send(
        `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":${JSON.stringify(relayToken)},"progress":1}}`,
      );
      env.s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: relayId, result: { content: [] } }));
      const line = await progressLine(stream);
      expect(
        rawMember(line, 'progressToken'),
        'the relay accepted this token (ids past 2^53 are refused with -32600 for exactly this reason) and must give it back unchanged',
      ).toBe(BIG);
    });

    it("a client's notification reaches the phone with its params unchanged but for the caller context", async () => {
      const h = await openSession(env.clientNode.mcpUrl, env.token);
      const from = env.rawFrames.length;
      const r = await fetch(env.clientNode.mcpUrl, {
        method: 'POST',
        headers: h,
        body: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"n":${BIG},"inf":1e400}}`,
      });
      expect(r.status).toBe(202);
      const { raw } = await env.nextRaw((x) => x.method === 'notifications/roots/list_changed', from);
      expect(raw, `the phone must get n:${BIG} and inf:1e400 as the client sent them`).toContain(
        `"n":${BIG},"inf":1e400`,
      );
    });
  });
}
