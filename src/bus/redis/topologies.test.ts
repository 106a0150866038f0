// The bus contract (contract.ts) on Sentinel and on a three-shard Redis Cluster, both started
// here from redis-server (ports 7000–7005, 7010–7011, 26380–26382).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busContract, replay } from '../contract.ts';
import { RedisBus } from './index.ts';
import { quietLog, randomPrefix, waitFor } from './test-support.ts';
import { at, startCluster, startSentinel, type ClusterTopology, type SentinelTopology } from './test-topologies.ts';

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

describe('control events on Redis Cluster', () => {
  it('leave one node from one server, so they cannot overtake each other on the cluster bus', async () => {
    // A plain PUBLISH goes to whichever node the client picks, and each node relays it to the
    // others on its own cluster-bus links: two events sent through two nodes can arrive swapped
    // (the GET stream handover reads them in order: docs/decisions/0246-get-stream-handover.md).
    const bus = await RedisBus.connect(cluster!.url, `c-${++n}`, quietLog, { prefix });
    try {
      const masters = await cluster!.masters();
      const published = () =>
        Promise.all(
          masters.map((port) =>
            at(port, async (r) =>
              Number(/cmdstat_publish:calls=(\d+)/.exec(String(await r.info('commandstats')))?.[1] ?? 0),
            ),
          ),
        );
      const before = await published();
      const events = 30;
      for (let i = 0; i < events; i++)
        await bus.publishControl({ type: 'stream_lapsed', sessionId: `s${i}`, nodeId: bus.nodeId });
      const after = await published();
      const grew = after.map((x, i) => x - before[i]).filter((d) => d > 0);
      expect(grew).toEqual([events]);
    } finally {
      await bus.close();
    }
  });
});
