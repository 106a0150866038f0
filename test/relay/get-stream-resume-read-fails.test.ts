// A resumed GET stream whose replay read fails (the bus away for a moment) is ended rather than
// continued live: a live event would move the client's Last-Event-ID past the events it missed,
// and no later resume would return them. Ended, the client resumes again from where it was and
// gets them, once and in order (GetStreams.open, src/gateway/get-streams.ts;
// docs/decisions/0246-get-stream-handover.md). One node on the embedded bus.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { openSession, post, readGetStream, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import type { SessionChannel } from '../../src/gateway/session-streams.ts';
import type { Bus } from '../../src/bus/types.ts';

let r: TestRelay;
let phone: TestPhone;
let token: string;

beforeAll(async () => {
  r = await startTestRelay();
  phone = await startTestPhone(r, () => createEchoServer());
  token = (await r.key(phone.deviceId)).token;
});
afterAll(async () => {
  await phone?.stop();
  await r?.stop();
});

const channelOf = (sessionId: string) =>
  r.relay.node.ctx.hub.allStreams().find((l) => l.sessionId === sessionId) as SessionChannel | undefined;
const notify = async (h: Record<string, string>, id: number, text: string) =>
  expect((await post(r.mcpUrl, h, toolCall(id, 'notify', { text }))).status).toBe(200);

it('a resume whose replay read fails ends; the next resume from the same id gets every missed event once', async () => {
  const h = await openSession(r.mcpUrl, token);
  const sid = h['mcp-session-id'];
  const first = await readGetStream(r.mcpUrl, h);
  await waitFor(() => first.events.length > 0 && channelOf(sid)?.connected === 1, 5000, 'primed');
  const lastId = first.events[0].id!;
  await first.stop();
  await waitFor(() => channelOf(sid)?.connected === 0, 5000, 'the drop seen');
  await notify(h, 1, 'missed-1');
  await notify(h, 2, 'missed-2');

  const bus = r.relay.node.ctx.bus;
  const replayAfter = bus.replayAfter.bind(bus);
  let reads = 0;
  (bus as { replayAfter: Bus['replayAfter'] }).replayAfter = (...args) =>
    reads++ === 0 ? Promise.reject(new Error('the bus is away')) : replayAfter(...args);
  try {
    const failed = await readGetStream(r.mcpUrl, h, lastId);
    await waitFor(() => reads === 1 && channelOf(sid)?.connected === 0, 5000, 'the failed resume ended');
    await notify(h, 3, 'while away');
    await failed.stop();
    expect(failed.texts()).toEqual([]); // nothing live after a replay it could not write

    const again = await readGetStream(r.mcpUrl, h, lastId);
    await waitFor(() => again.texts().includes('while away'), 5000, 'the replay');
    await notify(h, 4, 'after');
    await waitFor(() => again.texts().includes('after'), 5000, 'live again');
    await again.stop();
    expect(again.texts()).toEqual(['missed-1', 'missed-2', 'while away', 'after']);
  } finally {
    (bus as { replayAfter: Bus['replayAfter'] }).replayAfter = replayAfter;
  }
});
