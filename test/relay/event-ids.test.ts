// SSE event ids (`<streamId>:<seq>`, the cursor of Last-Event-ID) are never given twice in a
// session: an event written after its session ended (the phone removed while a POST stream was
// open, the session deleted) carries no id and is kept nowhere, instead of an id from a counter
// that starts again at 1. One node (in-process bus) and two nodes over Redis; real phone.
import { describe, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes } from '../helpers/two-nodes.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { openSession, openStream } from '../helpers/raw-mcp.ts';
import { parseEventId } from '../../src/bus/index.ts';

/** The events of an SSE body: their id (if any) and data. */
function events(text: string): Array<{ id?: string; data: string }> {
  return text
    .split('\n\n')
    .filter((block) => /^data: /m.test(block))
    .map((block) => ({ id: /^id: (.*)$/m.exec(block)?.[1], data: /^data: (.*)$/m.exec(block)![1] }));
}

function expectIncreasing(ids: string[]): void {
  const seqs = ids.map((id) => parseEventId(id)!.seq);
  for (let i = 1; i < seqs.length; i++) expect(seqs[i], `ids ${ids.join(' ')}`).toBeGreaterThan(seqs[i - 1]);
}

async function removedMidStream(phoneNode: TestRelay, clientNode: TestRelay, revision: string) {
  const phone = await startTestPhone(phoneNode, () => createEchoServer());
  const key = await phoneNode.key(phone.deviceId);
  const h = await openSession(clientNode.mcpUrl, key.token, revision);
  const stream = await openStream(clientNode.mcpUrl, {
    method: 'POST',
    headers: h,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'progress', arguments: { text: 'step', n: 1000, delayMs: 50 }, _meta: { progressToken: 't' } },
    }),
  });
  await waitFor(() => (stream.text().match(/notifications\/progress/g) ?? []).length >= 3, 10_000, 'progress');
  expect(await phoneNode.relay.store.store.removeDevice(phone.deviceId)).toBe(true);
  await Promise.race([
    stream.ended,
    new Promise((_, reject) => setTimeout(() => reject(new Error('the stream did not end')), 10_000)),
  ]);
  await phone.stop();
  const all = events(stream.text());
  const answer = JSON.parse(all.at(-1)!.data);
  expect(answer).toMatchObject({ id: 1, error: { data: { code: 'device_removed' } } });
  const ids = all.map((e) => e.id).filter((id): id is string => id !== undefined);
  expect(new Set(ids).size).toBe(ids.length);
  expectIncreasing(ids);
  // Every id names this stream; whatever came after the session ended carries none.
  const streamId = parseEventId(ids[0])!.streamId;
  expect(ids.every((id) => parseEventId(id)!.streamId === streamId)).toBe(true);
  return { sessionId: h['mcp-session-id'], streamId, answerId: all.at(-1)!.id };
}

describe('event ids after the session ended', () => {
  it('one node: the POST stream’s ids keep growing and the answer written after the session ended has none', async () => {
    const relay = await startTestRelay();
    try {
      const r = await removedMidStream(relay, relay, '2025-11-25');
      expect(r.answerId).toBeUndefined();
      expect(await relay.relay.node.ctx.bus.replayAfter(r.sessionId, `${r.streamId}:0`)).toEqual([]);
    } finally {
      await relay.stop();
    }
  }, 60_000);

  it('two nodes over Redis: no id repeats (no priming event: the stream’s first id is :1), and nothing is buffered for the ended session', async () => {
    const nodes = await startTwoNodes();
    try {
      const r = await removedMidStream(nodes.a, nodes.b, '2025-06-18');
      expect(r.answerId).toBeUndefined();
      for (const node of [nodes.a, nodes.b])
        expect(await node.relay.node.ctx.bus.replayAfter(r.sessionId, `${r.streamId}:0`)).toEqual([]);
    } finally {
      await nodes.stop();
    }
  }, 60_000);
});
