// A node restarted under the same id (a StatefulSet pod, docs/OPERATIONS.md "kill -9", or a
// rolling restart whose drain deadline passed with calls still running on other nodes) never
// takes its predecessor's answers for its own requests. The owner keys served requests and
// addresses their answers by node id and request id (served-requests.ts), so each process
// takes its request ids from blocks the bus numbers per node id (src/gateway/request-ids.ts;
// docs/decisions/0243-requests-on-the-bus-belong-to-one-process.md).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { outcome, rawClient, startTestCluster, waitFor, type ClusterPhone, type TestCluster } from './harness.ts';
import type { ClusterNode } from '../../services/cluster.ts';

let tc: TestCluster;
let A: ClusterNode, B: ClusterNode;
let phone: ClusterPhone;
let token: string;

beforeEach(async () => {
  tc = await startTestCluster({ nodes: 2, serveArgs: ['--request-timeout-ms', '30000'] }); // --drain-ms 5000 (harness)
  [A, B] = tc.nodes;
  phone = await tc.phone({ node: A, name: 'phone on A' });
  token = await tc.key(phone.deviceId);
  expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);
}, 90_000);

afterEach(async () => {
  await tc?.stop();
}, 60_000);

const sleptFor = (ms: number) => () => phone.control.calls.some((c) => (c.args as { ms?: number }).ms === ms);

describe('an origin node restarted under the same id', () => {
  it.each([
    ['SIGKILL', 9_000],
    ['SIGTERM', 11_000], // drains for --drain-ms (5 s) with the call still out at A, then exits
  ] as const)(
    "after %s: its new process's request is answered with its own answer, not its predecessor's",
    async (signal, oldMs) => {
      // The old process of B sends one request to the phone on A (its rid 1), and goes with it in flight.
      const c1 = await rawClient(B.url, token);
      const old = c1.call(B.url, 'old', 'sleep', { ms: oldMs }).catch((e: unknown) => e);
      await waitFor(sleptFor(oldMs), 10_000, 'old sleep on the phone');
      await B.kill(signal);
      await old;
      await c1.close();

      // The pod comes back under the same id; its first cross-node request is again rid 1.
      const B2 = await tc.cluster.startNode(B.index);
      expect(B2.id).toBe(B.id);
      const c2 = await rawClient(B2.url, token);
      const pending = c2.call(B2.url, 'new', 'sleep', { ms: 14_000 });
      await waitFor(sleptFor(14_000), 10_000, 'new sleep on the phone');
      expect(phone.control.calls.filter((c) => c.name === 'sleep').length).toBe(2);

      const answer = await pending;
      console.log(`${signal}: answer to the restarted node's request: ${JSON.stringify(answer)}`);
      expect(answer.id).toBe('new');
      expect(outcome(answer)).toBe('slept 14000');
      await c2.close();
    },
    90_000,
  );
});
