// A GET stream that drops and is resumed with Last-Event-ID again and again, on the same node
// or alternating between two (a load balancer without stickiness), while the phone keeps
// sending notifications: every notification reaches the client exactly once, in order.
// docs/PROTOCOL.md "GET streams"; MCP (Resumability): the server "MUST NOT replay messages that
// would have been delivered on a different stream". What makes it exact is the handover of
// docs/decisions/0246-get-stream-handover.md: the resuming stream is attached (its events held)
// before the replay buffer is read, and the `stream_live` announcement it waits for cuts the
// device's notifications between the stand-in that had the stream and the new connection
// (src/gateway/get-streams.ts connect, SessionChannel.liveElsewhere in session-streams.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestRelay } from '../helpers/relay.ts';
import { twoNodesWithEchoPhone, type TwoNodes, type TwoNodesWithPhone } from '../helpers/two-nodes.ts';
import { openSession, post, readGetStream, toolCall } from '../helpers/raw-mcp.ts';

let env: TwoNodesWithPhone;
let t: TwoNodes;
let token: string;

beforeAll(async () => {
  env = await twoNodesWithEchoPhone();
  ({ t, token } = env);
});
afterAll(async () => {
  await env?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function scenario(nodesFor: (round: number) => TestRelay, rounds: number) {
  const h = await openSession(t.b.mcpUrl, token);
  const seen: string[] = [];
  const ids: string[] = [];
  let lastId: string | undefined;
  let stop = false;
  let sent = 0;
  // The phone sends log notifications n0, n1, … one after another, for as long as the test runs.
  const sender = (async () => {
    for (let n = 0; !stop; n++) {
      const r = await post(t.b.mcpUrl, h, toolCall(`c${n}`, 'notify', { text: `n${n}` }));
      if (r.status !== 200) throw new Error(`notify answered ${r.status}`);
      sent = n + 1;
      await sleep(5);
    }
  })();
  for (let round = 0; round < rounds; round++) {
    const s = await readGetStream(nodesFor(round).mcpUrl, h, lastId);
    await sleep(150 + Math.floor(Math.random() * 100));
    await s.stop();
    for (const e of s.events) {
      if (e.id) {
        lastId = e.id;
        ids.push(e.id);
      }
      if (e.data) seen.push(JSON.parse(e.data).params.data);
    }
    await sleep(30); // the client is away a moment: the node buffers for it
  }
  stop = true;
  await sender;
  // Last resume: everything left, then wait for it to be quiet.
  const s = await readGetStream(nodesFor(rounds).mcpUrl, h, lastId);
  await sleep(1000);
  await s.stop();
  for (const e of s.events) if (e.data) seen.push(JSON.parse(e.data).params.data);
  const expected = Array.from({ length: sent }, (_, n) => `n${n}`);
  const dups = seen.filter((x, i) => seen.indexOf(x) !== i);
  const missing = expected.filter((x) => !seen.includes(x));
  return { seen, expected, dups, missing, sent };
}

describe('a GET stream resumed again and again while notifications flow', () => {
  it('resumed on the same node each time: every notification once, in order', async () => {
    const r = await scenario(() => t.b, 8);
    expect({ dups: r.dups, missing: r.missing }).toEqual({ dups: [], missing: [] });
    expect(r.seen).toEqual(r.expected);
  });

  it('resumed on the other node each time (a load balancer without stickiness): every notification once, in order', async () => {
    const r = await scenario((round) => (round % 2 ? t.a : t.b), 8);
    expect({ dups: r.dups, missing: r.missing }).toEqual({ dups: [], missing: [] });
    expect(r.seen).toEqual(r.expected);
  });
});
