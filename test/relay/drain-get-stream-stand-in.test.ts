// A node drains (a rolling restart behind a load balancer) while a client holds a GET stream
// on it. The drain closes the stream's connection at its start (`retry: 1000`) but keeps a
// stand-in buffering for it until the node exits (SessionChannel.disconnect in
// src/gateway/session-streams.ts, drainNode in src/gateway/node.ts), so a notification sent
// while the client waits to reconnect is replayed when it resumes, with Last-Event-ID, on the
// other node; that resume's `stream_live` announcement ends the stand-in
// (docs/decisions/0246-get-stream-handover.md; docs/PROTOCOL.md "GET streams", "Draining").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPhone, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { getStream, openSession, post, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';

let t: TwoNodes;
let phone: TestPhone;
let token: string;

beforeAll(async () => {
  t = await startTwoNodes(['--drain-ms', '5000']);
  phone = await startTestPhone(t.b, () => createEchoServer()); // the phone is on B, which stays
  token = (await t.b.key(phone.deviceId)).token;
});
afterAll(async () => {
  await phone?.stop();
  await t?.stop();
});

const connectedOn = (node: TestRelay, sid: string) =>
  node.relay.node.ctx.hub.allStreams().some((l) => l.sessionId === sid);

describe('a GET stream on a node that drains', () => {
  it('the notification sent between the drain ending the stream and the reconnect on the other node is replayed', async () => {
    const h = await openSession(t.b.mcpUrl, token);
    const sid = h['mcp-session-id'];
    const g = await getStream(t.a.mcpUrl, h);
    await waitFor(() => /id: (\S+)/.test(g.text()) && connectedOn(t.a, sid), 5000, 'GET stream on A, primed');
    const lastId = /id: (\S+)/.exec(g.text())![1];
    await t.a.relay.node.drain();
    await g.ended; // the relay ended it: reconnect (retry: 1000)
    expect(g.text()).toContain('retry: 1000');
    // During the client's retry delay the phone sends a notification.
    expect((await post(t.b.mcpUrl, h, toolCall(1, 'notify', { text: 'during the retry' }))).status).toBe(200);
    const again = await getStream(t.b.mcpUrl, { ...h, 'last-event-id': lastId });
    expect(again.status).toBe(200);
    await new Promise((r) => setTimeout(r, 700));
    again.abort();
    expect(again.text()).toContain('during the retry');
  });
});
