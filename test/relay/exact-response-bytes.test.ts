// The phone's answer reaches the client byte for byte but for its id (docs/PROTOCOL.md rewrite 2:
// "the rest of the response (up to 256 KiB) is neither parsed nor re-encoded"), on one node and
// across two.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, twoNodes, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession } from '../helpers/raw-mcp.ts';

const BIG = '12345678901234567890';
/** A result that any parse and re-serialisation would change. */
const RESULT = `{"content":[{"type":"text","text":"caf\\u00e9 \\ud800 \\/"}],"n":${BIG},"inf":1e400,"z":-0,"one":1.0,"dup":1,"dup":2}`;
const answerWith = (relayId: number) => `{ "result" : ${RESULT} ,\t"jsonrpc" : "2.0" , "id" : ${relayId} }`;

for (const topology of ['one node', 'two nodes (client on the node without the phone)'] as const) {
  describe(`the phone's answer, ${topology}`, () => {
    let env: RawEnv;
    beforeAll(async () => {
      env = topology === 'one node' ? await oneNode() : await twoNodes();
    });
    afterAll(() => env?.stop());

    async function callAnswered(
      headers: Record<string, string>,
      body: string,
      marker: string,
      delayMs: number,
    ): Promise<string> {
      const from = env.rawFrames.length;
      const r = fetch(env.clientNode.mcpUrl, { method: 'POST', headers, body }).then((x) => x.text());
      const { f } = await env.nextRaw((x) => x.method === 'tools/call' && x.params.arguments.m === marker, from);
      await new Promise((res) => setTimeout(res, delayMs));
      env.s.ws.send(answerWith(f.id));
      return r;
    }

    it("regression net: a JSON answer is the phone's bytes with the client's id", async () => {
      const h = await openSession(env.clientNode.mcpUrl, env.token);
      const text = await callAnswered(
        { ...h, accept: 'application/json' },
        `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"echo","arguments":{"m":"json"}}}`,
        'json',
        0,
      );
      expect(text).toBe(`{ "result" : ${RESULT} ,\t"jsonrpc" : "2.0" , "id" : "c1" }`);
    });
  });
}
