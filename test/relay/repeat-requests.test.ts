// A client's request that repeats its last one but for the id is read from the last one's
// bytes (docs/decisions/0259-a-request-read-as-the-last-one-again.md). Through the relay, on
// one node and across two: each repeat reaches the phone as itself and is answered to its own
// id, and a body that only looks like a repeat (an id JSON does not allow, a changed byte) is
// read as what it is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, twoNodes, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession, post } from '../helpers/raw-mcp.ts';

const body = (id: string, m = 'again') =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"m":"${m}"}}}`;

for (const topology of ['one node', 'two nodes (client on the node without the phone)'] as const) {
  describe(`repeated requests, ${topology}`, () => {
    let env: RawEnv;
    beforeAll(async () => {
      env = topology === 'one node' ? await oneNode() : await twoNodes();
    });
    afterAll(() => env?.stop());

    /** Posts `text`; the phone answers with the relay id it received as the result's text. */
    async function callOnce(h: Record<string, string>, text: string, m = 'again') {
      const from = env.rawFrames.length;
      const answer = post(env.clientNode.mcpUrl, { ...h, accept: 'application/json' }, text);
      const { raw, f } = await env.nextRaw((x) => x.method === 'tools/call' && x.params.arguments.m === m, from);
      env.s.ws.send(
        JSON.stringify({ jsonrpc: '2.0', id: f.id, result: { content: [{ type: 'text', text: String(f.id) }] } }),
      );
      return { answer: await answer, raw, f };
    }

    it('each repeat reaches the phone with its own relay id and is answered to its own id', async () => {
      const h = await openSession(env.clientNode.mcpUrl, env.token);
      const relayIds = new Set<number>();
      for (const id of ['1', '22', '333', '7', '-5', '0', '123456789012345']) {
        const { answer, raw, f } = await callOnce(h, body(id));
        expect(answer.status).toBe(200);
        expect(answer.json.id, `the answer to id ${id}`).toBe(Number(id));
        expect(answer.json.result.content[0].text).toBe(String(f.id));
        expect(raw).toContain('"arguments":{"m":"again"}');
        expect(f.params._meta['phonebridge/caller']).toBeDefined();
        expect(relayIds.has(f.id), 'a relay id used twice').toBe(false);
        relayIds.add(f.id);
      }
      // A changed byte after the id is not a repeat: the phone sees the new arguments.
      const changed = await callOnce(h, body('8', 'agaim'), 'agaim');
      expect(changed.answer.json.id).toBe(8);
      expect(changed.raw).toContain('"arguments":{"m":"agaim"}');
    });

    it('repeats in flight together are each answered to their own id', async () => {
      const h = await openSession(env.clientNode.mcpUrl, env.token);
      await callOnce(h, body('100')); // the memo holds this request now
      const from = env.rawFrames.length;
      const ids = [101, 102, 103, 104, 105];
      const answers = ids.map((id) =>
        post(env.clientNode.mcpUrl, { ...h, accept: 'application/json' }, body(String(id))),
      );
      const frames: Array<{ id: number }> = [];
      for (let k = 0; k < ids.length; k++) {
        const got = await env.nextRaw((x) => x.method === 'tools/call' && !frames.some((g) => g.id === x.id), from);
        frames.push(got.f);
      }
      // Answered in the reverse order of arrival.
      for (const f of [...frames].reverse())
        env.s.ws.send(
          JSON.stringify({ jsonrpc: '2.0', id: f.id, result: { content: [{ type: 'text', text: String(f.id) }] } }),
        );
      const got = await Promise.all(answers);
      expect(got.map((a) => a.json.id)).toEqual(ids);
      const texts = got.map((a) => Number(a.json.result.content[0].text));
      expect(new Set(texts).size).toBe(ids.length);
      expect(new Set(texts)).toEqual(new Set(frames.map((f) => f.id)));
    });

    it('an id JSON does not allow between the same bytes is refused, not forwarded', async () => {
      const h = await openSession(env.clientNode.mcpUrl, env.token);
      await callOnce(h, body('9'));
      for (const id of ['007', '1.', '--1', '1e', '0x1']) {
        const from = env.rawFrames.length;
        const answer = await post(env.clientNode.mcpUrl, { ...h, accept: 'application/json' }, body(id));
        expect(answer.json?.error?.code, `id ${id}`).toBe(-32700);
        expect(env.rawFrames.length, `id ${id} reached the phone`).toBe(from);
      }
      // And the next repeat is read as before.
      const { answer } = await callOnce(h, body('10'));
      expect(answer.json.id).toBe(10);
    });
  });
}
