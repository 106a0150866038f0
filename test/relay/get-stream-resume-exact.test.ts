// A GET stream resumed with Last-Event-ID gets each event it missed exactly once, step by step
// (no timing luck needed). docs/PROTOCOL.md "GET streams": a `GET` with `Last-Event-ID` replays
// that stream's later events and then continues it, on any node; while it is away the node
// that had it keeps buffering for 60 s. The handover (docs/decisions/0246-get-stream-handover.md):
// the resuming node attaches the stream before it reads the replay buffer, holding what arrives
// meanwhile until the replay is written (EventStream.holdForReplay/release in
// src/gateway/session-streams.ts), and announces it (`stream_live`), on which the node that
// had it drops its stand-in (SessionChannel.liveElsewhere), so a later resume does not get the
// events once per node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor, type TestRelay } from '../helpers/relay.ts';
import {
  sessionChannelOn,
  twoNodesWithEchoPhone,
  type TwoNodes,
  type TwoNodesWithPhone,
} from '../helpers/two-nodes.ts';
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

const channelOn = sessionChannelOn;

const notify = async (url: string, h: Record<string, string>, id: string, text: string) =>
  expect((await post(url, h, toolCall(id, 'notify', { text }))).status).toBe(200);

/** A GET stream on `node`, its priming event's id read, then dropped by the client; the node's channel keeps collecting. */
async function droppedStream(node: TestRelay, h: Record<string, string>): Promise<string> {
  const sid = h['mcp-session-id'];
  const first = await readGetStream(node.mcpUrl, h);
  await waitFor(() => first.events.length > 0 && channelOn(node, sid)?.connected === 1, 5000, 'GET stream primed');
  const primeId = first.events[0].id!;
  await first.stop();
  await waitFor(() => channelOn(node, sid)?.connected === 0, 5000, 'the node saw the drop');
  expect(channelOn(node, sid)?.idle).toBe(false); // collecting for the reconnect
  return primeId;
}

describe('a GET stream resumed with Last-Event-ID', () => {
  it('control: dropped on B, resumed on B, x lost in transit, resumed again from the same id: x once', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const primeId = await droppedStream(t.b, h);
    const second = await readGetStream(t.b.mcpUrl, h, primeId);
    await waitFor(() => channelOn(t.b, h['mcp-session-id'])?.connected === 1, 5000, 'resumed');
    await notify(t.b.mcpUrl, h, 'x', 'x');
    await waitFor(() => second.texts().includes('x'), 5000, 'x live');
    await second.stop();
    // The connection died before x reached the client: it resumes from the id it last saw.
    const third = await readGetStream(t.b.mcpUrl, h, primeId);
    await new Promise((r) => setTimeout(r, 700));
    await third.stop();
    expect(third.texts()).toEqual(['x']);
  });

  it('dropped on A, resumed on B, x lost in transit, resumed again from the same id: x once (not once per node)', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const primeId = await droppedStream(t.a, h);
    const second = await readGetStream(t.b.mcpUrl, h, primeId);
    await waitFor(() => channelOn(t.b, h['mcp-session-id'])?.connected === 1, 5000, 'resumed on B');
    await notify(t.b.mcpUrl, h, 'x', 'x');
    await waitFor(() => second.texts().includes('x'), 5000, 'x live');
    await second.stop();
    const third = await readGetStream(t.b.mcpUrl, h, primeId);
    await new Promise((r) => setTimeout(r, 700));
    await third.stop();
    expect(third.events.map((e) => `${e.id} ${e.data}`).join('\n')).not.toBe('');
    expect(third.texts(), third.events.map((e) => `id: ${e.id} data: ${e.data}`).join('\n')).toEqual(['x']);
  });

  it('a notification sent while the resuming GET reads the replay buffer (a slow Redis reply) reaches it', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const primeId = await droppedStream(t.b, h);
    await notify(t.b.mcpUrl, h, 'away', 'while away');
    // The replay read takes a while (Redis under load); a notification arrives meanwhile.
    const bus = t.b.relay.node.ctx.bus;
    const original = bus.replayAfter.bind(bus);
    let during: Promise<void> | undefined;
    bus.replayAfter = async (sessionId, lastEventId) => {
      const out = await original(sessionId, lastEventId);
      during = notify(t.b.mcpUrl, h, 'during', 'during replay');
      await during;
      await new Promise((r) => setTimeout(r, 100));
      return out;
    };
    let resumed;
    try {
      resumed = await readGetStream(t.b.mcpUrl, h, primeId);
      await waitFor(() => channelOn(t.b, h['mcp-session-id'])?.connected === 1, 5000, 'resumed');
      // The stream is attached before the replay is read: wait for the read (and the
      // notification sent during it) to be over before the next one.
      await waitFor(() => during !== undefined, 5000, 'replay read');
      await during;
    } finally {
      bus.replayAfter = original;
    }
    await notify(t.b.mcpUrl, h, 'after', 'after');
    await waitFor(() => resumed.texts().includes('after'), 5000, 'after, live');
    await new Promise((r) => setTimeout(r, 300));
    await resumed.stop();
    expect(resumed.texts()).toEqual(['while away', 'during replay', 'after']);
  });
});
