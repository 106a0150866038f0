// A phone that leaves after its node re-claimed it under a new epoch (the node stalled past its
// TTL, the other node reaped it, and it found it had been presumed dead) is no longer owned by
// that node. docs/OPERATIONS.md, "Redis unreachable": a node cut off alone is reaped by the
// others "and calls through them for its phones get `device_offline` until it is back and has
// reclaimed them"; src/bus/README.md: "`releaseDevice` is compare-and-delete", so the socket's
// close must release the claim it holds now (reclaimAll's epoch), not its first one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawClient, sleep, startTestCluster, waitFor, type TestCluster } from './harness.ts';

let tc: TestCluster;

beforeAll(async () => {
  tc = await startTestCluster({ nodes: 2, serveArgs: ['--request-timeout-ms', '5000'] });
}, 60_000);

afterAll(async () => {
  for (const n of tc?.nodes ?? []) if (n.alive) n.proc.kill('SIGCONT');
  await tc?.stop();
}, 60_000);

describe('a phone that leaves after its node was reaped and re-claimed it', () => {
  it('is no longer owned by that node once its socket closed', async () => {
    const [A, B] = tc.nodes;
    const phone = await tc.phone({ node: A, name: 'reaped then leaves' });
    const epochKey = `${tc.ownPrefix}dev:${phone.deviceId}`;
    const epoch0 = Number(await tc.redis.hget(epochKey, 'epoch'));
    expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);

    // A stalls past its node TTL (3 s): B reaps it, clearing its claim.
    A.proc.kill('SIGSTOP');
    try {
      await waitFor(async () => (await tc.ownerOf(phone.deviceId)) === undefined, 12_000, 'A reaped by B');
    } finally {
      A.proc.kill('SIGCONT');
    }
    // A finds it had been presumed dead and reclaims its phone (a new epoch: its claim was reaped).
    await waitFor(async () => (await tc.ownerOf(phone.deviceId)) === A.id, 10_000, 'A reclaimed the phone');
    const epoch1 = Number(await tc.redis.hget(epochKey, 'epoch'));
    expect(phone.closes).toEqual([]); // the socket lived through the stall
    expect(epoch1).toBeGreaterThan(epoch0);

    // The phone goes away for good (a clean close).
    await phone.stop();
    await sleep(1500);
    // Nobody holds it: no live node may be named its owner (calls for it are still sent to A,
    // which answers "gone", before device_offline).
    const owner = await tc.ownerOf(phone.deviceId);
    const client = await rawClient(B.url, await tc.key(phone.deviceId));
    const t = Date.now();
    const answer = await client.call(B.url, 1, 'echo', { text: 'x' });
    const seen = { owner, code: answer?.error?.data?.code, ms: Date.now() - t };
    console.log('after the phone left:', seen);
    expect(seen.owner).toBeUndefined();
    expect(seen.code).toBe('device_offline');
    await client.close();
  }, 60_000);
});
