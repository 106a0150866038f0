// The bus contract (contract.ts) on Sentinel and on a three-shard Redis Cluster, both started
// here from redis-server (ports 7000–7005, 7010–7011, 26380–26382).
import { afterAll, beforeAll } from 'vitest';
import { busContract, replay } from '../contract.ts';
import { RedisBus } from './index.ts';
import { quietLog, randomPrefix } from './test-support.ts';
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
