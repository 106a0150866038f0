// Network faults between two nodes and Redis (the cluster bus), injected with Toxiproxy under
// load from official SDK clients: `local` on the phone's node (A), `remote` through the other
// node (B), so every remote call crosses Redis twice. Short windows; the long ones are
// `npm run loadtest -- faults`. A Redis restart is test/cluster/redis-outage.test.ts.
//
// What must hold: latency slows calls but fails none; a connection that stops answering is
// declared down within the node TTL plus a heartbeat (3 s + 1 s: src/bus/README.md, "Failures"),
// calls that need Redis fail with relay_unavailable within their deadline (never device_offline:
// the phone never left), calls on the phone's own node keep working; resets and a bandwidth cap
// the same; recovery without a restart; no phone socket, session or ownership lost.
// test/faults/redis-reclaim.test.ts forces the order (one node back on Redis before the other)
// that these runs meet only sometimes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFault, startFaultCluster, type FaultCluster, type FaultResult, type FaultSpec } from './fault-cluster.ts';
import { waitFor } from '../cluster/harness.ts';

const TIMEOUT_MS = 5000;
let fc: FaultCluster;
let pids: Array<number | undefined>;

beforeAll(async () => {
  fc = await startFaultCluster({ via: 'redis', requestTimeoutMs: TIMEOUT_MS });
  pids = fc.tc.nodes.map((n) => n.proc.pid);
}, 60_000);
afterAll(async () => {
  await fc?.stop();
}, 30_000);

const W = { beforeMs: 300, faultMs: 2000, afterMs: 100, recoverWithinMs: 10_000 };

function report(r: FaultResult): void {
  const { calls_: _c, t0: _t, onAt: _on, offAt: _off, ...rest } = r;
  console.log(`redis ${r.fault}: ${JSON.stringify(rest)}`);
}

/** Never a hang, only the codes that say "Redis", nothing lost, back by itself. */
async function failedCleanly(r: FaultResult): Promise<void> {
  expect(r.slowestMs).toBeLessThan(TIMEOUT_MS + 1000);
  for (const code of Object.keys(r.failed))
    // Never device_offline: the phone's socket never closed. A node back on Redis before the
    // phone's node has renewed and reclaimed it waits for that (docs/decisions/0210-no-phone-offline-because-redis-was-down.md).
    expect(code).toMatch(/^(relay_unavailable|http_503_relay_unavailable)$/);
  // Clients on the phone's node never needed Redis: their sessions are leased there.
  expect(r.failedByClient.local ?? 0).toBe(0);
  expect(r.recoveredMs).not.toBeNull();
  expect(fc.tc.nodes.map((n) => n.proc.pid)).toEqual(pids);
  expect(fc.phone.closes).toEqual([]);
  await waitFor(async () => (await fc.tc.ownerOf(fc.phone.deviceId)) === fc.tc.nodes[0].id, 10_000, 'phone owned by A');
}

const toxic = (t: FaultSpec['toxics']): FaultSpec['toxics'] => t;

describe('Redis faults under load through two nodes', () => {
  it('latency +200 ms ±50: no call fails; Redis command time and /readyz show it', async () => {
    const r = await runFault(
      fc,
      {
        name: 'latency',
        toxics: toxic([{ toxic: { type: 'latency', attributes: { latency: 200, jitter: 50 } }, stream: 'downstream' }]),
      },
      W,
    );
    report(r);
    expect(r.failed).toEqual({});
    expect(r.meanCommandMsDuring).toBeGreaterThan(150);
    expect(r.readyzDuring).toMatchObject({ status: 'ready', redis: { up: true } });
    expect((r.readyzDuring as { redis: { heartbeat_ms: number } }).redis.heartbeat_ms).toBeGreaterThan(150);
    expect(r.slowestDuringMs).toBeGreaterThan(250); // a remote call waits for two deliveries (≥ 150 ms each)
    await failedCleanly(r);
  }, 40_000);

  it('a connection that stops answering: down within 4.5 s, relay_unavailable within the deadline, back after', async () => {
    const r = await runFault(
      fc,
      {
        name: 'timeout',
        toxics: toxic([{ toxic: { type: 'timeout', attributes: { timeout: 0 } }, stream: 'downstream' }]),
      },
      { ...W, faultMs: 5000 },
    );
    report(r);
    expect(r.detectedMs).not.toBeNull();
    expect(r.detectedMs!).toBeLessThan(4500);
    expect(r.failedByClient.remote).toBeGreaterThan(0);
    expect(r.readyzDuring).toMatchObject({ status: 'ready', redis: { up: false } });
    await failedCleanly(r);
  }, 40_000);

  it('connection resets: down at once, relay_unavailable at once, back after', async () => {
    const r = await runFault(
      fc,
      {
        name: 'reset_peer',
        toxics: toxic([{ toxic: { type: 'reset_peer', attributes: { timeout: 0 } }, stream: 'upstream' }]),
      },
      // Longer than the node TTL (3 s): every node's liveness lapses, and the order in which
      // they come back decides whether one finds the other's phone without a live owner.
      { ...W, faultMs: 4000 },
    );
    report(r);
    expect(r.detectedMs).not.toBeNull();
    expect(r.detectedMs!).toBeLessThan(2000);
    expect(r.failedByClient.remote).toBeGreaterThan(0);
    await failedCleanly(r);
  }, 40_000);

  it('bandwidth capped at 1 KB/s: calls slow down, none hangs', async () => {
    const r = await runFault(
      fc,
      {
        name: 'bandwidth',
        toxics: toxic([{ toxic: { type: 'bandwidth', attributes: { rate: 1 } }, stream: 'downstream' }]),
      },
      W,
    );
    report(r);
    await failedCleanly(r);
  }, 40_000);
});
