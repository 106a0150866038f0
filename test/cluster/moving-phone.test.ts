// A phone that takes longer than the moving mark (MOVE_GRACE_MS, 5 s) to come back from a
// draining node: three `phonebridge serve` nodes behind the front, real Redis and Postgres, a
// real phone (DeviceAgent) paired with the front. When its node drains (SIGTERM, close 1012),
// the test holds the phone's reconnect on purpose — as a phone whose first reconnect failed
// and backed off for seconds (src/device/agent/backoff.ts), or a loaded new node, would — while
// a client's call for it waits on another node. The call must reach the phone once it is back,
// and fail with device_offline only when the phone does not return within the call's deadline
// (docs/decisions/0209-a-moving-phone-is-waited-for-until-the-deadline.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  outcomeWithReason,
  rawClient,
  sleep,
  startTestCluster,
  waitFor,
  type ClusterPhone,
  type TestCluster,
} from './harness.ts';
import { MOVE_GRACE_MS, movingKey } from '../../src/gateway/router.ts';
import type { ClusterNode } from '../../services/cluster.ts';

/** The relay's deadline for every call (`--request-timeout-ms`). */
const DEADLINE_MS = 15_000;

let tc: TestCluster;

beforeAll(async () => {
  tc = await startTestCluster({
    nodes: 3,
    serveArgs: ['--request-timeout-ms', String(DEADLINE_MS), '--drain-ms', '5000'],
  });
}, 90_000);

afterAll(async () => {
  await tc?.stop();
}, 60_000);

/**
 * Keeps the phone off the relay after its next 1012 (its node draining) until `release()`:
 * the agent is stopped as soon as it reports the close, before its reconnect runs.
 */
function holdAfterDrain(phone: ClusterPhone) {
  let stopped: Promise<void> | undefined;
  let closedAt = 0;
  const onClose = (e: { code: number }) => {
    if (e.code !== 1012 || stopped) return;
    closedAt = Date.now();
    stopped = phone.agent.stop();
  };
  phone.agent.on('disconnected', onClose);
  return {
    /** Resolves with the time of the 1012 once the phone is stopped. */
    async closed(): Promise<number> {
      await waitFor(() => stopped !== undefined, 15_000, 'the phone closed with 1012');
      await stopped;
      return closedAt;
    },
    async release(): Promise<void> {
      phone.agent.off('disconnected', onClose);
      await stopped;
      phone.agent.start();
    },
  };
}

/** The moving mark as Redis holds it (src/bus/redis/scripts.ts `hit`: `rl:<key>`). */
const markKey = (deviceId: string) => `${tc.prefix}rl:${movingKey(deviceId)}`;

/** A call whose settlement the test can look at without awaiting it. */
function watched<T>(p: Promise<T>) {
  const w = { settled: false, at: 0, promise: p };
  void p.then(
    () => Object.assign(w, { settled: true, at: Date.now() }),
    () => Object.assign(w, { settled: true, at: Date.now() }),
  );
  return w;
}

async function ownerNode(deviceId: string): Promise<ClusterNode> {
  let id: string | undefined;
  await waitFor(async () => (id = await tc.ownerOf(deviceId)) !== undefined, 15_000, 'the phone owned');
  return tc.node(id!);
}

describe('a phone that comes back from a draining node later than the moving mark', () => {
  it('a call held for it on another node reaches it once it is back; device_offline only at the call deadline if it never returns', async () => {
    const phone = await tc.phone({ name: 'slow mover' });
    const token = await tc.key(phone.deviceId);

    // --- 1: the phone is back 5 s + after its node drained: the held call reaches it -------------
    const X = await ownerNode(phone.deviceId);
    const [Y] = tc.nodes.filter((n) => n !== X);
    const client = await rawClient(Y.url, token);
    try {
      expect(outcomeWithReason(await client.call(Y.url, 'warm', 'echo', { text: 'warm' }))).toBe('warm');
      const hold = holdAfterDrain(phone);
      X.proc.kill('SIGTERM');
      const closedAt = await hold.closed();
      const call = watched(client.call(Y.url, 'held', 'echo', { text: 'after a slow move' }));
      // The mark was set before the socket closed: once it has lapsed in Redis, the phone is
      // later than MOVE_GRACE_MS, and the call must still be waiting for it.
      await waitFor(async () => (await tc.redis.exists(markKey(phone.deviceId))) === 0, 15_000, 'the mark lapsed');
      await sleep(500); // the router polls every 50 ms: it has looked past the mark by now
      const lapsedAfter = Date.now() - closedAt;
      if (call.settled)
        throw new Error(
          `the held call was answered ${call.at - closedAt} ms after the 1012, before the phone came back: ${outcomeWithReason(await call.promise)}`,
        );
      await hold.release();
      const answer = await call.promise;
      console.log(
        `slow move: the mark had lapsed ${lapsedAfter} ms after the 1012, the phone still away; the held call answered ${call.at - closedAt} ms after the 1012`,
      );
      expect(outcomeWithReason(answer)).toBe('after a slow move');
      expect(lapsedAfter).toBeGreaterThanOrEqual(MOVE_GRACE_MS - 1000);
      expect(phone.control.calls.map((c) => (c.args as { text?: string }).text)).toContain('after a slow move');
      expect((await X.exited).code).toBe(0);

      // --- 2: the phone does not come back within the call's deadline: device_offline then --------
      const W = await ownerNode(phone.deviceId);
      const [V] = tc.nodes.filter((n) => n.alive && n !== W);
      // A client of the draining node itself too, on a keep-alive connection opened before the drain.
      const onW = await rawClient(W.url, token);
      expect(outcomeWithReason(await onW.call(W.url, 'warm W', 'echo', { text: 'warm W' }))).toBe('warm W');
      const hold2 = holdAfterDrain(phone);
      const termAt = Date.now();
      W.proc.kill('SIGTERM');
      const closed2 = await hold2.closed();
      const started = Date.now();
      const onDraining = onW.call(W.url, 'held by W', 'echo', { text: 'never delivered' }).then(
        (a: unknown) => ({ a, at: Date.now() }),
        (err: Error) => ({ a: { error: { data: { code: `transport: ${err.message}` } } }, at: Date.now() }),
      );
      const lost = await client.call(V.url, 'never back', 'echo', { text: 'never delivered' });
      const waited = Date.now() - started;
      const w = await onDraining;
      await onW.close();
      console.log(
        `phone not back: the call held by ${V.id} answered after ${waited} ms (${outcomeWithReason(lost)}); ` +
          `the one held by the draining ${W.id} ${w.at - termAt} ms after its SIGTERM (${outcomeWithReason(w.a)})`,
      );
      // The draining node answers what it holds at its drain deadline (--drain-ms 5000), before it exits.
      expect(outcomeWithReason(w.a)).toMatch(/^error:device_offline .*before this relay node stopped/);
      expect(w.at - started).toBeLessThan(DEADLINE_MS - 2000);
      expect(outcomeWithReason(lost)).toMatch(/^error:device_offline/);
      // Held until its own deadline, not only while the mark lived.
      expect(waited).toBeGreaterThanOrEqual(DEADLINE_MS - 1000);
      expect(waited).toBeLessThan(DEADLINE_MS + 2500);
      expect(started - closed2).toBeLessThan(MOVE_GRACE_MS);

      // Back afterwards: calls reach it again through the last node.
      await hold2.release();
      await waitFor(async () => (await tc.ownerOf(phone.deviceId)) === V.id, 15_000, 'the phone back on the last node');
      expect(outcomeWithReason(await client.call(V.url, 'back', 'echo', { text: 'back' }))).toBe('back');
      expect(phone.control.calls.some((c) => (c.args as { text?: string }).text === 'never delivered')).toBe(false);
    } finally {
      await client.close();
      await phone.stop();
    }
  }, 120_000);
});
