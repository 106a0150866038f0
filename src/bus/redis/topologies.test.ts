// The bus contract (contract.ts) on Sentinel and on a three-shard Redis Cluster, both started
// here from redis-server (ports 7000–7005, 7010–7011, 26380–26382).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busContract, replay } from '../contract.ts';
import { RedisBus } from './index.ts';
import { quietLog, randomPrefix, waitFor } from './test-support.ts';
import { startCluster, startSentinel, type ClusterTopology, type SentinelTopology } from './test-topologies.ts';

let cluster: ClusterTopology | undefined;
let sentinel: SentinelTopology | undefined;
const prefix = randomPrefix();
let n = 0;

beforeAll(async () => {
  [cluster, sentinel] = await Promise.all([startCluster(7000), startSentinel(7010, 26380)]);
}, 60_000);
afterAll(async () => {
  await Promise.all([cluster?.stop(), sentinel?.stop()]);
});

busContract([
  ['cluster', (r = replay) => RedisBus.connect(cluster!.url, `c-${++n}`, quietLog, { prefix, replay: r })],
  ['sentinel', (r = replay) => RedisBus.connect(sentinel!.url, `s-${++n}`, quietLog, { prefix, replay: r })],
]);

describe('the quiet connection through Sentinel', () => {
  it('carries quiet answers and counted publishes to the master, in order, with their receiver counts', async () => {
    const bus = await RedisBus.connect(sentinel!.url, `s-${++n}`, quietLog, { prefix });
    try {
      await waitFor(() => bus.quietReady, 5000, 'the quiet connection');
      const got: string[] = [];
      bus.onNodeMessage((m) => got.push(m));
      const sent = [
        bus.replyToNode(bus.nodeId, 'answer'),
        bus.sendToNode(bus.nodeId, 'note'),
        bus.sendToNode('nobody', 'x'),
      ];
      expect(await Promise.all(sent)).toEqual([undefined, true, false]);
      await waitFor(() => got.length === 2, 2000, 'both messages');
      expect(got).toEqual(['answer', 'note']);
    } finally {
      await bus.close();
    }
  });
});
