// A call never runs twice. A node killed (-9) while running another node's call: the origin
// routes the call again only if the dead node had stopped starting work on the phone (its
// goodbye, or its own moved-from mark: RemoteRequests.afterNodeDown). A phone that drained from
// X to Y a moment ago still has X's moving mark; Y killed while running a call from O must not
// make O run that call again where the phone reconnects
// (docs/decisions/0243-requests-on-the-bus-belong-to-one-process.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  outcomeWithReason,
  rawClient,
  startTestCluster,
  waitFor,
  type RawClient,
  type TestCluster,
} from './harness.ts';
import type { ClusterNode } from '../../services/cluster.ts';

let tc: TestCluster;

beforeAll(async () => {
  tc = await startTestCluster({ nodes: 3, serveArgs: ['--request-timeout-ms', '30000', '--drain-ms', '5000'] });
}, 90_000);

afterAll(async () => {
  await tc?.stop();
}, 60_000);

describe('a node killed while running a call, shortly after the phone moved to it', () => {
  it('the call is not run a second time on the node the phone reconnects to', async () => {
    const phone = await tc.phone({ name: 'mover' }); // through the front: it reconnects to any node
    const token = await tc.key(phone.deviceId);
    let owner: string | undefined;
    await waitFor(async () => (owner = await tc.ownerOf(phone.deviceId)) !== undefined, 15_000, 'owned');
    const X = tc.node(owner!);
    const clients = new Map<ClusterNode, RawClient>();
    for (const n of tc.nodes.filter((n) => n !== X)) clients.set(n, await rawClient(n.url, token));

    // X drains: the phone is marked moving, closed with 1012, and reconnects to Y.
    const termAt = Date.now();
    void X.kill('SIGTERM');
    let y: string | undefined;
    await waitFor(
      async () => (y = await tc.ownerOf(phone.deviceId)) !== undefined && y !== X.id,
      10_000,
      'the phone on its next node',
    );
    const Y = tc.node(y!);
    const O = [...clients.keys()].find((n) => n !== Y)!;
    const client = clients.get(O)!;

    // A client on O calls the phone on Y; Y starts it on the phone, then dies.
    const before = phone.control.calls.filter((c) => c.name === 'sleep').length;
    const started = Date.now();
    const pending = client.call(O.url, 'once', 'sleep', { ms: 12_000 }).catch((e: Error) => ({ transport: e.message }));
    await waitFor(
      () => phone.control.calls.filter((c) => c.name === 'sleep').length > before,
      5000,
      'the call running on the phone via Y',
    );
    const killedAt = Date.now();
    await Y.kill('SIGKILL');
    const answer = await pending;
    const runs = phone.control.calls.filter((c) => c.name === 'sleep').length - before;
    console.log(
      `X drained ${killedAt - termAt} ms before Y was killed; answer after ${Date.now() - started} ms: ${
        'transport' in answer ? answer.transport : outcomeWithReason(answer)
      }; the phone ran the call ${runs} time(s); phone now on ${await tc.ownerOf(phone.deviceId)}`,
    );
    expect(runs).toBe(1);
    expect(outcomeWithReason(answer)).toMatch(/^error:device_offline/);
    for (const c of clients.values()) await c.close();
  }, 90_000);
});
