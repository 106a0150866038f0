// A session's GET streams on two nodes (no sticky load balancing) get each phone notification
// once in all, not once per node. docs/PROTOCOL.md: "Phone notifications (other than progress)
// go to the session's streams: to exactly **one** stream per session (the newest), never to all
// of them." MCP 2025-11-25 (Streamable HTTP, "Multiple Connections"): the server "MUST NOT
// broadcast the same message across multiple streams". A node connecting a GET stream announces
// it (`stream_live`); a node with an older stream of the session stops delivering to it
// (SessionChannel.elsewhere in src/gateway/session-streams.ts, GetStreams.onControl in
// src/gateway/get-streams.ts; docs/decisions/0246-get-stream-handover.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/relay.ts';
import {
  sessionChannelOn,
  twoNodesWithEchoPhone,
  type TwoNodes,
  type TwoNodesWithPhone,
} from '../helpers/two-nodes.ts';
import { getStream, openSession, post, toolCall, type OpenStream } from '../helpers/raw-mcp.ts';

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

const count = (s: OpenStream, text: string) => s.text().split(`"${text}"`).length - 1;

describe('a session with GET streams on two nodes', () => {
  it('control: two GET streams on one node get a notification once in all', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const g1 = await getStream(t.b.mcpUrl, h);
    const g2 = await getStream(t.b.mcpUrl, h);
    await waitFor(() => channelOn(t.b, h['mcp-session-id'])?.connected === 2, 5000, 'two streams on b');
    expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'one-node' }))).status).toBe(200);
    await waitFor(() => count(g1, 'one-node') + count(g2, 'one-node') > 0, 5000, 'delivery');
    await new Promise((r) => setTimeout(r, 500));
    expect(count(g1, 'one-node') + count(g2, 'one-node')).toBe(1);
    g1.abort();
    g2.abort();
  });

  it('each phone notification reaches exactly one of them, not one per node', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const onA = await getStream(t.a.mcpUrl, h);
    await waitFor(() => channelOn(t.a, sid)?.connected === 1, 5000, 'stream on a');
    const onB = await getStream(t.b.mcpUrl, h); // the newest
    await waitFor(() => channelOn(t.b, sid)?.connected === 1, 5000, 'stream on b');
    expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'two-nodes' }))).status).toBe(200);
    await waitFor(() => count(onA, 'two-nodes') + count(onB, 'two-nodes') > 0, 5000, 'delivery');
    await new Promise((r) => setTimeout(r, 500));
    const got = { onA: count(onA, 'two-nodes'), onB: count(onB, 'two-nodes') };
    expect(got.onA + got.onB, JSON.stringify(got)).toBe(1);
    onA.abort();
    onB.abort();
  });

  it('the newest closes: the older stays quiet while the newest is buffered for, and its resume gets what came meanwhile', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const older = await getStream(t.a.mcpUrl, h);
    await waitFor(() => channelOn(t.a, sid)?.connected === 1, 5000, 'older stream on a');
    const newest = await getStream(t.b.mcpUrl, h);
    await waitFor(() => /id: (\S+)/.test(newest.text()) && channelOn(t.b, sid)?.connected === 1, 5000, 'newest on b');
    const lastId = /id: (\S+)/.exec(newest.text())![1];
    newest.abort();
    await waitFor(() => channelOn(t.b, sid)?.connected === 0, 5000, 'b saw the drop');
    expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'meanwhile' }))).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    expect(count(older, 'meanwhile')).toBe(0);
    // The client resumes the newest, on the node of the older one.
    const resumed = await getStream(t.a.mcpUrl, { ...h, 'last-event-id': lastId });
    await waitFor(() => count(resumed, 'meanwhile') > 0, 5000, 'replayed');
    expect((await post(t.b.mcpUrl, h, toolCall(2, 'notify', { text: 'after' }))).status).toBe(200);
    await waitFor(() => count(resumed, 'after') + count(older, 'after') > 0, 5000, 'delivery');
    await new Promise((r) => setTimeout(r, 300));
    expect({ resumed: count(resumed, 'after'), older: count(older, 'after') }).toEqual({ resumed: 1, older: 0 });
    expect(count(resumed, 'meanwhile') + count(older, 'meanwhile')).toBe(1);
    resumed.abort();
    older.abort();
  });

  it('the newest closes and is not resumed: once its node stops buffering for it, the older takes the notifications again', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const older = await getStream(t.a.mcpUrl, h);
    await waitFor(() => channelOn(t.a, sid)?.connected === 1, 5000, 'older stream on a');
    const newest = await getStream(t.b.mcpUrl, h);
    await waitFor(() => channelOn(t.b, sid)?.connected === 1 && channelOn(t.a, sid)!.elsewhere, 5000, 'newest on b');
    newest.abort();
    await waitFor(() => channelOn(t.b, sid)?.connected === 0, 5000, 'b saw the drop');
    // The stand-in's 60 s grace, run out at once (SessionChannel.lapse).
    (channelOn(t.b, sid) as unknown as { lapse(): void }).lapse();
    await waitFor(() => channelOn(t.a, sid)?.elsewhere === false, 5000, 'the older is the newest again');
    expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'later' }))).status).toBe(200);
    await waitFor(() => count(older, 'later') > 0, 5000, 'delivery to the older');
    await new Promise((r) => setTimeout(r, 300));
    expect(count(older, 'later')).toBe(1);
    older.abort();
  });
});
