// Sentinel failover under load: master + replica + three sentinels from redis-server (ports
// 7030–7031, 26383–26385); kill -9 the master while three relay nodes serve calls.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSentinel, type SentinelTopology } from '../../src/bus/redis/test-topologies.ts';
import { failoverUnderLoad, startFailoverCluster } from './topology-failover.ts';
import type { TestCluster } from './harness.ts';

let topo: SentinelTopology | undefined;
let tc: TestCluster | undefined;

beforeAll(async () => {
  topo = await startSentinel(7030, 26383);
  tc = await startFailoverCluster(topo.url);
}, 90_000);

afterAll(async () => {
  await tc?.stop();
  await topo?.stop();
}, 60_000);

describe('Sentinel: kill -9 of the master under load', () => {
  it('the replica is promoted; every node re-resolves and serves again without a restart; phones stay connected', async () => {
    const t = topo!;
    const before = await t.masterPort();
    const figures = await failoverUnderLoad(
      tc!,
      async () => `Sentinel master on ${await t.killMaster()} killed`,
      async () => (await t.masterPort().catch(() => before)) !== before,
    );
    expect(figures.phonesLost).toBe(0);
  }, 110_000);
});
