// Calls another node sent here whose origin node died (kill -9). Their client is gone for good:
// nothing can deliver or resume their answers (the origin wrote their streams), so they are
// abandoned calls (docs/decisions/0042-abandoned-calls.md) and stop counting against their
// key's share of the phone once the owner hears that the origin is gone (ServedRequests
// .originGone; docs/decisions/0243-requests-on-the-bus-belong-to-one-process.md).
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
import type { ClusterNode } from '../../services/cluster.ts';

let tc: TestCluster;
let A: ClusterNode, B: ClusterNode;
let phone: ClusterPhone;
let token: string;

beforeAll(async () => {
  tc = await startTestCluster({
    nodes: 2,
    serveArgs: ['--request-timeout-ms', '30000', '--max-in-flight-per-key', '2'],
  });
  [A, B] = tc.nodes;
  phone = await tc.phone({ node: A, name: 'phone on A' });
  token = await tc.key(phone.deviceId);
  expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);
}, 90_000);

afterAll(async () => {
  await tc?.stop();
}, 60_000);

describe('the origin node of calls running on the phone dies', () => {
  it("its calls stop holding the key's share once the owner node knows the origin is gone", async () => {
    const onB = await rawClient(B.url, token);
    const before = phone.control.calls.length;
    const calls = [1, 2].map((i) => onB.call(B.url, `long-${i}`, 'sleep', { ms: 25_000 }).catch(() => 'gone'));
    await waitFor(() => phone.control.calls.length >= before + 2, 5000, 'both calls on the phone');

    const onA = await rawClient(A.url, token);
    // The key's share (2) is full while B's clients wait: refused, as designed.
    expect(outcomeWithReason(await onA.call(A.url, 'busy', 'echo', { text: 'x' }))).toMatch(/^error:device_busy/);

    const killedAt = Date.now();
    await B.kill('SIGKILL');
    await Promise.all(calls);
    await onB.close();
    // B's liveness lapses within about 4 s (3 s TTL, 1 s heartbeat); give A 8 s to act on it.
    let last = '';
    for (let i = 0; Date.now() - killedAt < 8000; i++) {
      last = outcomeWithReason(await onA.call(A.url, `after-${i}`, 'echo', { text: 'after' }));
      if (last === 'after') break;
      await sleep(250);
    }
    console.log(`${Date.now() - killedAt} ms after B was killed, a call of the same key on A: ${last}`);
    expect(last).toBe('after');
    await onA.close();
  }, 60_000);
});
