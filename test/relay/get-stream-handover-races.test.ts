// Races around the GET stream handover of docs/decisions/0246-get-stream-handover.md, on two
// nodes sharing Redis and Postgres: a session deleted while its GET is still subscribing to the
// phone leaves no channel behind in the hub (SessionChannel.join); a stand-in whose grace ends
// while a GET of the same session is being announced on its node does not end that GET
// (SessionChannel.lapse); a GET is shown open (its 200) only once attached, so a notification
// the client causes as soon as it sees the 200 reaches it, however long the announcement took.
// Controls: a lapsed stand-in gives the notifications back to a silenced stream once; a DELETE
// ends the silenced stream and the stand-in on both nodes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/relay.ts';
import {
  sessionChannelOn,
  twoNodesWithEchoPhone,
  type TwoNodes,
  type TwoNodesWithPhone,
} from '../helpers/two-nodes.ts';
import type { SessionChannel } from '../../src/gateway/session-streams.ts';
import { getStream, openSession, post, readGetStream, toolCall } from '../helpers/raw-mcp.ts';

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
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** G1 on A (silenced), G2 on B (the newest) dropped by its client: B keeps a stand-in. */
async function silencedOnAStandInOnB(h: Record<string, string>) {
  const sid = h['mcp-session-id'];
  const g1 = await readGetStream(t.a.mcpUrl, h);
  await waitFor(() => channelOn(t.a, sid)?.connected === 1 && g1.events.length > 0, 5000, 'g1 on a');
  const g2 = await readGetStream(t.b.mcpUrl, h);
  await waitFor(() => channelOn(t.b, sid)?.connected === 1 && g2.events.length > 0, 5000, 'g2 on b');
  await waitFor(() => channelOn(t.a, sid)?.elsewhere === true, 5000, 'a silenced');
  await g2.stop();
  await waitFor(() => channelOn(t.b, sid)?.connected === 0, 5000, 'b saw the drop');
  expect(channelOn(t.b, sid)?.idle).toBe(false); // stand-in
  return { g1, g2Id: g2.events[0].id! };
}

describe('the GET stream handover on two nodes', () => {
  it('a DELETE while a GET is joining the device does not leave the session channel in the hub', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const bus = t.a.relay.node.ctx.bus as any;
    expect((t.a.relay.node.ctx.hub as any).listeners.has(env.phone.deviceId)).toBe(false); // a fresh subscription
    const orig = bus.subscribeDevice;
    bus.subscribeDevice = function (...args: unknown[]) {
      const sub = orig.apply(this, args);
      return sleep(400).then(() => sub);
    };
    try {
      const g = getStream(t.a.mcpUrl, h);
      await sleep(150);
      const del = await fetch(t.b.mcpUrl, { method: 'DELETE', headers: h });
      expect(del.status).toBe(200);
      const s = await g;
      await sleep(1500);
      s.abort();
      const left = t.a.relay.node.ctx.hub.allStreams().filter((l) => l.sessionId === sid);
      console.log(
        'GET status',
        s.status,
        'ended',
        s.isEnded(),
        'listeners left on a:',
        left.length,
        left.map((l: any) => ({ closed: l.closed })),
      );
      expect(left.length).toBe(0);
    } finally {
      bus.subscribeDevice = orig;
    }
  });

  it('a stand-in lapsing while a GET of the session is being announced on its node does not end that GET', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const first = await readGetStream(t.b.mcpUrl, h);
    await waitFor(() => channelOn(t.b, sid)?.connected === 1 && first.events.length > 0, 5000, 'primed on b');
    await first.stop();
    await waitFor(() => channelOn(t.b, sid)?.connected === 0, 5000, 'b saw the drop');
    const ch = channelOn(t.b, sid)!;
    expect(ch.idle).toBe(false); // the stand-in, its 60 s grace running
    const bus = t.b.relay.node.ctx.bus as any;
    const orig = bus.publishControl;
    bus.publishControl = function (e: any) {
      if (e.type === 'stream_live') return sleep(400).then(() => orig.call(this, e));
      return orig.call(this, e);
    };
    let second: Awaited<ReturnType<typeof readGetStream>>;
    try {
      // A new GET: waiting for its stream_live (its 200 comes once it is attached).
      const opening = readGetStream(t.b.mcpUrl, h);
      await waitFor(() => ch.opening > 0, 5000, 'GET opening on b');
      (ch as any).lapse(); // the grace ends just now (the timer firing)
      second = await opening;
      await sleep(400);
    } finally {
      bus.publishControl = orig;
    }
    expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'after-lapse' }))).status).toBe(200);
    await sleep(700);
    const onB = t.b.relay.node.ctx.hub.allStreams().filter((l) => l.sessionId === sid) as SessionChannel[];
    console.log(
      'second GET texts:',
      JSON.stringify(second!.texts()),
      'events',
      second!.events.length,
      'channels on b:',
      onB.map((c) => ({ closed: c.closed, connected: c.connected })),
    );
    await second!.stop();
    expect(second!.texts()).toEqual(['after-lapse']);
  });

  it('a GET shown open (200) gets the notification its client causes right after, its announcement slow', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const bus = t.b.relay.node.ctx.bus as any;
    const orig = bus.publishControl;
    bus.publishControl = function (e: any) {
      if (e.type === 'stream_live') return sleep(400).then(() => orig.call(this, e));
      return orig.call(this, e);
    };
    try {
      const g = await readGetStream(t.b.mcpUrl, h);
      expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'right-after' }))).status).toBe(200);
      await waitFor(() => g.texts().includes('right-after'), 5000, 'the notification on the GET');
      await g.stop();
    } finally {
      bus.publishControl = orig;
    }
  });

  it('control: a lapsed stand-in gives the notifications back to the silenced stream, once', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const { g1 } = await silencedOnAStandInOnB(h);
    (channelOn(t.b, sid) as any).lapse();
    await waitFor(() => channelOn(t.a, sid)?.elsewhere === false, 5000, 'a takes over');
    expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'back' }))).status).toBe(200);
    await waitFor(() => g1.texts().includes('back'), 5000, 'back on g1');
    await sleep(300);
    await g1.stop();
    expect(g1.texts()).toEqual(['back']);
  });

  it('control: DELETE of the session ends the silenced stream and the stand-in on both nodes, nothing kept', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const { g1 } = await silencedOnAStandInOnB(h);
    const del = await fetch(t.b.mcpUrl, { method: 'DELETE', headers: h });
    expect(del.status).toBe(200);
    await waitFor(() => !channelOn(t.a, sid) && !channelOn(t.b, sid), 5000, 'channels gone');
    await g1.stop();
  });
});
