// Redis Cluster failover under load: three masters with a replica each from redis-server
// (ports 7020–7025); kill -9 the master holding the ownership slot while three relay nodes
// serve calls.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { at, startCluster, type ClusterTopology } from '../../src/bus/redis/test-topologies.ts';
import { failoverUnderLoad, startFailoverCluster } from './topology-failover.ts';
import type { TestCluster } from './harness.ts';

let topo: ClusterTopology | undefined;
let tc: TestCluster | undefined;

beforeAll(async () => {
  topo = await startCluster(7020);
  tc = await startFailoverCluster(topo.url);
}, 90_000);

afterAll(async () => {
  await tc?.stop();
  await topo?.stop();
}, 60_000);

describe('Redis Cluster: kill -9 of a master under load', () => {
  it('its replica is promoted; every node serves again without a restart; phones stay connected', async () => {
    const t = topo!;
    // The master of the ownership slot: claims, epochs and heartbeats all live there.
    const slot = await at(t.ports[0], (r) => r.cluster('KEYSLOT', `${tc!.ownPrefix}x`));
    const slots = (await at(t.ports[0], (r) => r.cluster('SLOTS'))) as unknown as Array<
      [number, number, [string, number]]
    >;
    const victim = Number(slots.find(([from, to]) => from <= Number(slot) && Number(slot) <= to)![2][1]);
    const figures = await failoverUnderLoad(
      tc!,
      async () => {
        await t.kill(victim);
        return `cluster master on ${victim} (slot ${slot}: ownership) killed`;
      },
      () => t.healthy(),
    );
    expect(figures.phonesLost).toBe(0);
  }, 110_000);
});
