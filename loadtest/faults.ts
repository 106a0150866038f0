// faults: network faults between the nodes and their stores, injected with Toxiproxy
// (scripts/ensure-toxiproxy.sh) under load from official MCP SDK clients — one on the phone's
// node, one through the other node. For Redis and then Postgres, each fault in turn: latency
// +200 ms ±50, a connection that stops answering (`timeout`), connection resets, a bandwidth
// cap of 1 KB/s, and the proxy cut (the server restarting, as the nodes see it). Each fault is
// held for --duration seconds (default 15) after 5 s of healthy load, then removed; the load
// goes on until every client succeeds again and 3 s more. Reports per fault: calls failed by
// code, the slowest answer, when the node said so (phonebridge_<store>_up 0), time to recover,
// and what was lost (phone sockets, sessions: a lost session shows as an HTTP 404), with a chart
// of calls/s and failures/s over time. The short versions of these runs are test/faults/.
// --redis-url: the Redis behind the proxy, one redis:// (default PHONEBRIDGE_TEST_REDIS_URL or
// redis://127.0.0.1:6379). Toxiproxy forwards one address, so other topologies are refused
// (exit 64): a Sentinel or a Redis Cluster hands the nodes further addresses (the master, the
// shards) that they would dial past the proxy, and rediss:// would check the server's
// certificate against the proxy's address. --target is refused: the nodes are the scenario's.
import { UsageError, type CommonOptions } from './lib/options.ts';
import { oneRedisUrl } from './lib/relay.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import { lineChart } from './lib/svg.ts';
import type { FaultSpec, Via } from '../test/faults/fault-cluster.ts';

const FAULTS: FaultSpec[] = [
  {
    name: 'latency',
    toxics: [{ toxic: { type: 'latency', attributes: { latency: 200, jitter: 50 } }, stream: 'downstream' }],
  },
  { name: 'timeout', toxics: [{ toxic: { type: 'timeout', attributes: { timeout: 0 } }, stream: 'downstream' }] },
  { name: 'reset_peer', toxics: [{ toxic: { type: 'reset_peer', attributes: { timeout: 0 } }, stream: 'upstream' }] },
  { name: 'bandwidth', toxics: [{ toxic: { type: 'bandwidth', attributes: { rate: 1 } }, stream: 'downstream' }] },
  { name: 'cut', disable: true },
];

const REQUEST_TIMEOUT_MS = 30_000; // the relay's default deadline

async function run(ctx: ScenarioContext): Promise<void> {
  const m = ctx.metrics;
  const calls = m.counter('calls');
  const failed = m.counter('failed');
  const hung = m.counter('client_timeout'); // no answer within the relay's deadline + 10 s
  const wrong = m.counter('wrong_answer');
  const lostSessions = m.counter('sessions_lost');
  const lostPhones = m.counter('phone_sockets_lost');
  const duration = m.trend('call_duration');
  const slowest = m.gauge('slowest_answer_ms');
  let worst = 0;
  const faultMs = ctx.durationS * 1000;
  // test/faults/fault-cluster.ts and the cluster harness it starts read the Redis they proxy
  // and share from PHONEBRIDGE_TEST_REDIS_URL as they load: set it first, then load them.
  const redisUrl = proxiedRedisUrl(ctx.opts);
  process.env.PHONEBRIDGE_TEST_REDIS_URL = redisUrl;
  ctx.figures.redis = redisUrl.replace(/\/\/[^@/]*@/, '//…@'); // no password in the report
  const { runFault, startFaultCluster, timeline } = await import('../test/faults/fault-cluster.ts');
  ctx.beginLoad();
  for (const via of ['redis', 'postgres'] as Via[]) {
    ctx.setNote(`${via}: starting two nodes behind Toxiproxy`);
    const fc = await startFaultCluster({ via, requestTimeoutMs: REQUEST_TIMEOUT_MS });
    try {
      ctx.setPhones(1);
      for (const spec of FAULTS) {
        ctx.setNote(`${via}: ${spec.name}`);
        const r = await runFault(fc, spec, {
          beforeMs: 5000,
          faultMs,
          afterMs: 3000,
          recoverWithinMs: 60_000,
        });
        for (const c of r.calls_) {
          calls.add();
          duration.add(c.end - c.start);
          if (c.outcome === 'ok') continue;
          failed.add();
          m.counter(`failed_${c.outcome}`).add();
          if (c.outcome === 'client_timeout') hung.add();
          if (c.outcome === 'wrong_answer') wrong.add();
          if (c.outcome.startsWith('http_404')) lostSessions.add();
        }
        worst = Math.max(worst, r.slowestMs);
        slowest.set(worst);
        const { calls_: _c, t0: _t, onAt: _on, offAt: _off, ...summary } = r;
        ctx.figures[`${via}_${spec.name}`] = { ...summary, phone_closes: [...fc.phone.closes] };
        const failedText = Object.entries(r.failed)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ');
        const tl = timeline(r.calls_, r.t0, 500);
        const peak = Math.max(1, ...tl.map((b) => b.ok + b.failed));
        const on = (r.onAt - r.t0) / 1000;
        const off = (r.offAt - r.t0) / 1000;
        ctx.chart(
          `${via}-${spec.name}.svg`,
          `${via}: ${spec.name} — calls/s and failures/s over time`,
          lineChart(
            {
              title: `${via} ${spec.name}: calls/s (fault from ${on.toFixed(1)} s to ${off.toFixed(1)} s)`,
              xLabel: 's',
              yLabel: 'calls/s',
            },
            [
              { name: 'answered ok', points: tl.map((b) => [b.t, b.ok]) },
              { name: 'failed', points: tl.map((b) => [b.t, b.failed]) },
              {
                name: 'fault on',
                points: tl.map((b) => [b.t, b.t >= on && b.t < off ? peak : 0]),
              },
            ],
          ),
        );
        ctx.note(
          `${via} ${spec.name} (${(faultMs / 1000).toFixed(0)} s): ${r.calls} calls, failed ${failedText || 'none'} ` +
            `(local ${r.failedByClient.local ?? 0}, remote ${r.failedByClient.remote ?? 0}); slowest answer ${r.slowestMs} ms; ` +
            `${upName(via)} 0 after ${r.detectedMs ?? '— (never)'} ms; every client ok again ${r.recoveredMs ?? '— (not)'} ms after the fault ended; ` +
            `phone socket closes so far: ${fc.phone.closes.length}`,
        );
      }
      lostPhones.add(fc.phone.closes.length);
    } finally {
      await fc.stop();
    }
  }
}

/** The one Redis the nodes reach through Toxiproxy: a plain redis:// (see the header). */
function proxiedRedisUrl(opts: CommonOptions): string {
  const url = oneRedisUrl(opts);
  if (!url.startsWith('redis://'))
    throw new UsageError(
      `faults puts Toxiproxy in front of one Redis address, so --redis-url must be redis://, not ${url.split(':')[0]}:// (a Sentinel or Cluster hands the nodes addresses past the proxy; rediss:// would check the certificate against the proxy's address)`,
    );
  return url;
}

const upName = (via: Via) => (via === 'redis' ? 'phonebridge_redis_up' : 'phonebridge_store_up');

export const scenario: Scenario = {
  name: 'faults',
  description:
    'Latency, stalls, resets, a bandwidth cap and a cut between two nodes and Redis, then Postgres (Toxiproxy), under load from SDK clients on the phone node and another node: failures by code, slowest answer, detection, recovery, losses.',
  defaultDurationS: 15,
  thresholds: [
    'client_timeout:count==0',
    'wrong_answer:count==0',
    'sessions_lost:count==0',
    'phone_sockets_lost:count==0',
  ],
  run,
  refusesTarget: 'it puts Toxiproxy between the nodes it starts and their Redis and Postgres',
  validate: (opts) => void proxiedRedisUrl(opts),
};
