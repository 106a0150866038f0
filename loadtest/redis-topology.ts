// `node --import tsx loadtest/redis-topology.ts cluster|sentinel [BASE_PORT]`: a local Redis topology for
// the load tests' --redis-url, from the system's redis-server (the same starter as the tests:
// src/bus/redis/test-topologies.ts). Prints the URL, runs until SIGINT/SIGTERM, then removes it.
// Default ports: cluster 7060–7065, sentinel 7070–7071 with sentinels 26390–26392.
import { startCluster, startSentinel } from '../src/bus/redis/test-topologies.ts';

const kind = process.argv[2];
const base = Number(process.argv[3] ?? (kind === 'sentinel' ? 7070 : 7060));
if (kind !== 'cluster' && kind !== 'sentinel') {
  console.error('usage: node --import tsx loadtest/redis-topology.ts cluster|sentinel [BASE_PORT]');
  process.exit(64);
}
const topo = kind === 'cluster' ? await startCluster(base) : await startSentinel(base, 26390);
console.log(topo.url);
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void topo.stop().finally(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
// A bound, like every load-test helper: an hour at most.
setTimeout(stop, 3600_000).unref();
setInterval(() => {}, 1 << 30);
