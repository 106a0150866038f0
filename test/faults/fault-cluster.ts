// A cluster whose nodes reach Redis or Postgres through Toxiproxy, with a phone, official SDK
// clients on the phone's node and on another node, and one fault case at a time under load:
// the fixture of test/faults/*.test.ts (short windows) and `npm run loadtest -- faults` (long).
// The test's own connections (its store, its Redis client) go direct, so a fault hits only the
// nodes, as it would a pod whose network path to its store degrades.
import { URL } from 'node:url';
import { startTestCluster, waitFor, type ClusterPhone, type TestCluster } from '../cluster/harness.ts';
import { REDIS_URL } from '../../src/bus/redis/test-support.ts';
import { startToxiproxy, type Proxy, type Toxic, type Toxiproxy, type Stream } from '../helpers/toxiproxy.ts';
import {
  runSdkLoad,
  sdkClient,
  summarize,
  timeline,
  type Call,
  type FaultSummary,
  type SdkClient,
} from './sdk-load.ts';

export type Via = 'redis' | 'postgres';

export interface FaultCluster {
  via: Via;
  tc: TestCluster;
  toxiproxy: Toxiproxy;
  /** The proxy between every node and the store named by `via`. */
  proxy: Proxy;
  phone: ClusterPhone;
  /** A key the nodes have checked (cached) before any fault. */
  token: string;
  clients: SdkClient[];
  requestTimeoutMs: number;
  stop(): Promise<void>;
}

export async function startFaultCluster(o: {
  via: Via;
  nodes?: number;
  requestTimeoutMs: number;
  serveArgs?: string[];
}): Promise<FaultCluster> {
  const toxiproxy = await startToxiproxy();
  let tc: TestCluster | undefined;
  try {
    const redis = new URL(REDIS_URL);
    const pg = new URL(process.env.PHONEBRIDGE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
    const upstream =
      o.via === 'redis' ? `${redis.hostname}:${redis.port || 6379}` : `${pg.hostname}:${pg.port || 5432}`;
    const proxy = await toxiproxy.proxy(o.via, upstream);
    tc = await startTestCluster({
      nodes: o.nodes ?? 2,
      serveArgs: ['--request-timeout-ms', String(o.requestTimeoutMs), ...(o.serveArgs ?? [])],
      ...(o.via === 'redis'
        ? { nodeRedisUrl: proxy.through(REDIS_URL) }
        : { nodeDatabaseUrl: (u: string) => proxy.through(u) }),
    });
    const [A, B] = tc.nodes;
    const phone = await tc.phone({ node: A, name: 'phone on A' });
    const token = await tc.key(phone.deviceId);
    const clients = [await sdkClient('local', A.url, token), await sdkClient('remote', B.url, token)];
    // Both nodes have checked the key and leased their sessions: the warm state faults meet.
    for (const c of clients) await c.client.callTool({ name: 'echo', arguments: { text: 'warm' } });
    const cluster = tc;
    return {
      via: o.via,
      tc: cluster,
      toxiproxy,
      proxy,
      phone,
      token,
      clients,
      requestTimeoutMs: o.requestTimeoutMs,
      async stop() {
        await Promise.all(clients.map((c) => c.close()));
        await proxy.clear().catch(() => {});
        await cluster.stop();
        await toxiproxy.stop();
      },
    };
  } catch (err) {
    await tc?.stop().catch(() => {});
    await toxiproxy.stop();
    throw err;
  }
}

/** One fault: turned on, held, turned off. */
export interface FaultSpec {
  name: string;
  /** Toxics to add (each on its stream), or `disable` to cut the proxy (the server restarting). */
  toxics?: Array<{ toxic: Toxic; stream: Stream }>;
  disable?: boolean;
}

export interface FaultResult extends FaultSummary {
  /** ms from the fault's start until every node's `phonebridge_<via>_up` read 0 (null: it never did). */
  detectedMs: number | null;
  /** What /readyz of the phone's node answered while the fault was on. */
  readyzDuring: unknown;
  /** Mean of the store's (or Redis') command duration during the fault once settled (SETTLE_MS), from /metrics. */
  meanCommandMsDuring: number | null;
  calls_: Call[];
  t0: number;
  onAt: number;
  offAt: number;
}

/** Longer than the slowest injected latency (250 ms), so every command timed after it met the fault. */
const SETTLE_MS = 400;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function metricsText(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

export function metricValue(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Sum of a histogram's `_sum` and `_count` over every label set. */
function histogram(text: string, name: string): { sum: number; count: number } {
  let sum = 0;
  let count = 0;
  for (const l of text.split('\n')) {
    if (l.startsWith(`${name}_sum`)) sum += Number(l.slice(l.lastIndexOf(' ') + 1));
    if (l.startsWith(`${name}_count`)) count += Number(l.slice(l.lastIndexOf(' ') + 1));
  }
  return { sum, count };
}

/**
 * Runs load through both nodes: `beforeMs` healthy, the fault for `faultMs`, then until every
 * client succeeds again and `afterMs` more. Measures what the clients saw and what the nodes'
 * /metrics and /readyz said meanwhile.
 */
export async function runFault(
  fc: FaultCluster,
  spec: FaultSpec,
  w: { beforeMs: number; faultMs: number; afterMs: number; recoverWithinMs: number },
): Promise<FaultResult> {
  const upMetric = fc.via === 'redis' ? 'phonebridge_redis_up' : 'phonebridge_store_up';
  const durMetric =
    fc.via === 'redis' ? 'phonebridge_redis_command_duration_seconds' : 'phonebridge_store_query_duration_seconds';
  const A = fc.tc.nodes[0];
  const load = runSdkLoad(fc.clients, { clientTimeoutMs: fc.requestTimeoutMs + 10_000 });
  const t0 = Date.now();
  await sleep(w.beforeMs);
  const onAt = Date.now();
  const added: string[] = [];
  for (const t of spec.toxics ?? []) added.push(await fc.proxy.add(t.toxic, { stream: t.stream }));
  if (spec.disable) await fc.proxy.setEnabled(false);
  let detectedMs: number | null = null;
  let readyzDuring: unknown;
  // The command-time window opens once the fault has settled: a command that finished before
  // the toxic was in place (or whose reply had already passed the proxy) would count its
  // healthy time and pull the mean down by how busy the machine was while the toxic was added.
  let h0: { sum: number; count: number } | undefined;
  const until = Date.now() + w.faultMs;
  while (Date.now() < until) {
    if (h0 === undefined && Date.now() - onAt >= SETTLE_MS) h0 = histogram(await metricsText(A.adminPort), durMetric);
    if (detectedMs === null) {
      const ups = await Promise.all(
        fc.tc.nodes.map(async (n) => metricValue(await metricsText(n.adminPort), upMetric)),
      );
      if (ups.every((v) => v === 0)) detectedMs = Date.now() - onAt;
    }
    readyzDuring = await (await fetch(`http://127.0.0.1:${A.adminPort}/readyz`)).json();
    await sleep(100);
  }
  const h1 = histogram(await metricsText(A.adminPort), durMetric);
  const offAt = Date.now();
  for (const name of added) await fc.proxy.remove(name);
  if (spec.disable) await fc.proxy.setEnabled(true);
  const names = fc.clients.map((c) => c.name);
  await waitFor(
    () => names.every((n) => load.calls.some((c) => c.client === n && c.start >= offAt && c.outcome === 'ok')),
    w.recoverWithinMs,
    `every client succeeding again after ${spec.name}`,
  ).catch(() => {}); // reported as recoveredMs: null, asserted by the caller
  await sleep(w.afterMs);
  const calls = await load.stop();
  const during = h0 && { sum: h1.sum - h0.sum, count: h1.count - h0.count };
  return {
    ...summarize(spec.name, calls, onAt, offAt),
    detectedMs,
    readyzDuring,
    meanCommandMsDuring: during && during.count > 0 ? Math.round((during.sum / during.count) * 1000 * 10) / 10 : null,
    calls_: calls,
    t0,
    onAt,
    offAt,
  };
}

export { timeline };
