// docs/PROTOCOL.md "Liveness": "A JSON-RPC `ping` request from the phone is answered `{}` by the
// relay itself". MCP ids are `string | number`; JSON-RPC has the response carry the request's id.
// A phone whose ping id is an integer past 2^53 (a 64-bit counter) gets no answer at all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, type RawEnv } from '../helpers/frame-text-phone.ts';

describe("the phone's own ping", () => {
  let env: RawEnv;
  beforeAll(async () => {
    env = await oneNode();
  });
  afterAll(() => env?.stop());

  it('whose id is an integer past 2^53 is answered (with that id)', async () => {
    const from = env.rawFrames.length;
    env.s.ws.send('{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}');
    // A ping with an ordinary id, sent after it: its answer shows the relay has handled both.
    env.s.ws.send('{"jsonrpc":"2.0","id":"after","method":"ping"}');
    await env.nextRaw((x) => x.id === 'after', from);
    const answers = env.rawFrames.slice(from).filter((r) => r.includes('"result"') && !r.includes('"after"'));
    expect(
      answers,
      'PROTOCOL.md: "A JSON-RPC ping request from the phone is answered {} by the relay itself"; got no answer at all',
    ).toHaveLength(1);
    expect(answers[0], 'JSON-RPC: the response id must be the request id').toContain('"id":12345678901234567890');
  });
});
