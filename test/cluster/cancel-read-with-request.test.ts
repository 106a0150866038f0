// A client's notifications/cancelled for a request that runs on another node. The origin (B)
// sends `cancel` only after Redis confirmed the request's publish, so the owner (A) reads it
// after the request; when both wait in A's socket (A busy for a moment: a GC pause, a loaded
// event loop) they are read in one chunk and dispatched in one synchronous loop. The request is
// in the owner's table before anything in serve() awaits (served-requests.ts, untilReady;
// docs/decisions/0243-requests-on-the-bus-belong-to-one-process.md), so the cancel stops it on
// the phone whichever path it took.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawClient, sleep, startTestCluster, waitFor, type ClusterPhone, type TestCluster } from './harness.ts';
import type { ClusterNode } from '../../services/cluster.ts';

let tc: TestCluster;
let A: ClusterNode, B: ClusterNode;
let phone: ClusterPhone;
let token: string;

beforeAll(async () => {
  tc = await startTestCluster({ nodes: 2, serveArgs: ['--request-timeout-ms', '30000'] });
  [A, B] = tc.nodes;
  phone = await tc.phone({ node: A, name: 'phone on A' });
  token = await tc.key(phone.deviceId);
  expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);
}, 90_000);

afterAll(async () => {
  if (A?.alive) A.proc.kill('SIGCONT');
  await tc?.stop();
}, 60_000);

async function originSent(node: ClusterNode): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${node.adminPort}/metrics`)).text();
  return Number(/^phonebridge_cross_node_requests_total\{role="origin"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

/** One call from a client on B to the phone on A, cancelled on B while A is paused; what the phone saw. */
async function cancelWhileOwnerPaused(id: string, meta: Record<string, unknown> | undefined) {
  const raw = await rawClient(B.url, token);
  try {
    // A warm-up call: the owner is known to B, the session is leased on B (the fast path's conditions).
    expect((await raw.call(B.url, `${id}-warm`, 'echo', { text: 'hi' })).result?.content?.[0]?.text).toBe('hi');
    const before = { calls: phone.control.calls.length, cancellations: phone.control.cancellations };
    const sent = await originSent(B);

    A.proc.kill('SIGSTOP'); // A busy for a moment: what reaches it waits in its sockets
    let answer: any;
    try {
      const pending = raw.post(B.url, {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'sleep', arguments: { ms: 8000 }, ...(meta && { _meta: meta }) },
      });
      await waitFor(async () => (await originSent(B)) > sent, 5000, 'B sent the request to A');
      await sleep(100); // Redis has confirmed the publish: B's cancel goes out after it
      const note = await raw.post(B.url, {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: id, reason: 'changed my mind' },
      });
      expect(note.status).toBe(202);
      answer = (await pending).json;
      await sleep(100);
    } finally {
      A.proc.kill('SIGCONT');
    }
    // The phone either never runs the call or is told to stop it; give it 5 s to be told.
    await waitFor(() => phone.control.calls.length > before.calls, 3000, 'A went on').catch(() => {});
    const ran = phone.control.calls.length > before.calls;
    if (ran)
      await waitFor(() => phone.control.cancellations > before.cancellations, 5000, 'cancel reached the phone').catch(
        () => {},
      );
    const told = phone.control.cancellations - before.cancellations;
    console.log(
      `${id}: client got ${JSON.stringify(answer?.error?.data)}; phone ran the call: ${ran}; told to stop: ${told}`,
    );
    return { answer, ran, told };
  } finally {
    await raw.close();
  }
}

describe('notifications/cancelled sent to the origin node, the owner reading the request and the cancel together', () => {
  it('a call with a progress token (_meta: the general path) is cancelled on the phone', async () => {
    const { answer, ran, told } = await cancelWhileOwnerPaused('with-meta', { progressToken: 'p-slow' });
    expect(answer?.error?.data?.code).toBe('cancelled');
    if (ran) expect(told).toBe(1);
  }, 60_000);

  // The same call as bytes (no _meta): the fast path on the owner.
  it('a call without _meta (bytes path) is cancelled on the phone', async () => {
    const { answer, ran, told } = await cancelWhileOwnerPaused('as-bytes', undefined);
    expect(answer?.error?.data?.code).toBe('cancelled');
    if (ran) expect(told).toBe(1);
  }, 60_000);
});
