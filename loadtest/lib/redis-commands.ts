// Redis commands counted from `INFO commandstats` on every master of a topology (one Redis,
// Sentinel's master, each Redis Cluster master), for "commands per call" (docs/BENCHMARKS.md).
// Commands a Lua script runs count under their own names, EVALSHA once more for the script.
import { Cluster, type Redis } from 'ioredis';
import { connectorFor } from '../../src/bus/redis/connector.ts';

export interface RedisCounter {
  readonly kind: string;
  /** Commands per name, summed over the masters (INFO itself left out). */
  count(): Promise<Map<string, number>>;
  /**
   * CPU Redis has used (user + system, every thread: `INFO cpu`), µs, summed over the masters:
   * what the bus costs Redis itself. Replicas' replication work is not in it.
   */
  cpuUs(): Promise<number>;
  /** Deletes every key under the prefix, master by master (SCAN, load tests only). */
  dropPrefix(prefix: string): Promise<void>;
  close(): void;
}

export async function redisCounter(url: string): Promise<RedisCounter> {
  const connector = connectorFor(url, '');
  const c = connector.client('cmd', { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  c.on('error', () => {});
  await connector.connect(c);
  const masters = (): Redis[] => (c instanceof Cluster ? c.nodes('master') : [c]);
  return {
    kind: connector.topology.kind,
    async count() {
      const out = new Map<string, number>();
      for (const m of masters()) {
        const text = await m.info('commandstats');
        for (const [, name, calls] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
          if (name !== 'info') out.set(name, (out.get(name) ?? 0) + Number(calls));
      }
      return out;
    },
    async cpuUs() {
      let us = 0;
      for (const m of masters()) {
        const text = await m.info('cpu');
        for (const [, seconds] of text.matchAll(/^used_cpu_(?:sys|user):([\d.]+)/gm)) us += Number(seconds) * 1e6;
      }
      return us;
    },
    async dropPrefix(prefix) {
      for (const m of masters()) {
        let cursor = '0';
        for (let round = 0; round < 10_000; round++) {
          const [next, keys] = await m.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
          // One DEL per key: on a cluster the keys of one SCAN span slots.
          for (const k of keys) await m.del(k);
          cursor = next;
          if (cursor === '0') break;
        }
      }
    },
    close: () => c.disconnect(),
  };
}

/**
 * What the relay sends itself (round trips on its connections): a script counts once, as its
 * EVALSHA; everything else Redis counts under a name the bus never sends is a script's inside
 * (or a replica's REPLCONF ack, not ours at all).
 */
const SENT = new Set([
  'evalsha',
  'eval',
  'publish',
  'spublish',
  'set',
  'getdel',
  'lrange',
  'subscribe',
  'ssubscribe',
  'unsubscribe',
  'sunsubscribe',
  'ping',
  'echo',
  'script',
  'client',
  'cluster',
]);

/** Commands between two counts, per call: all (scripts' insides too), those sent, the five largest. */
export function perCall(
  before: Map<string, number>,
  after: Map<string, number>,
  calls: number,
): { total: number; sent: number; top: Record<string, number> } {
  const diff: Array<[string, number]> = [];
  for (const [name, n] of after) diff.push([name, n - (before.get(name) ?? 0)]);
  const r = (x: number) => Math.round((x / Math.max(1, calls)) * 1000) / 1000;
  const total = diff.reduce((s, [, n]) => s + n, 0);
  // commandstats names subcommands `client|reply`: counted by their command.
  // EVAL is the bus's request script (docs/decisions/0225-quiet-requests.md): Redis counts its
  // PUBLISH again under `publish`, although the bus did not send that one.
  const ofDiff = (name: string) => diff.find(([n]) => n === name)?.[1] ?? 0;
  const insideEval = Math.min(ofDiff('eval'), ofDiff('publish'));
  const sent = diff.reduce((s, [name, n]) => s + (SENT.has(name.split('|')[0]) ? n : 0), 0) - insideEval;
  return {
    total: r(total),
    sent: r(sent),
    top: Object.fromEntries(
      diff
        .filter(([, n]) => n > 0)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map(([name, n]) => [name, r(n)]),
    ),
  };
}
