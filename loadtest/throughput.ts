// throughput: small tools/calls, closed loop (a fixed number of callers, each waiting for its
// answer) and open loop (a fixed arrival rate: latency counts from when a call was due, so
// slow answers cannot hide queueing), on one node and on three nodes over Redis with clients
// and phones spread over the nodes (most calls cross the bus). HDR-histogram percentiles.
import { barChart, lineChart } from './lib/svg.ts';
import { clientAgent, McpSession } from './lib/mcp-client.ts';
import { connectPhones, pool, type Population } from './lib/phones.ts';
import { loadSurface } from './lib/light-phone.ts';
import { REDIS_URL, startRelays, targetNode, type TargetNode } from './lib/relay.ts';
import { perCall, redisCounter } from './lib/redis-commands.ts';
import { parseRedisUrl } from '../src/bus/redis/topology.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import type { Trend } from './lib/metrics.ts';

const CLOSED_CALLERS = 32;
const MAX_IN_FLIGHT = 2000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Phase {
  name: string;
  callsPerS: number;
  p50: number;
  p99: number;
  errors: number;
  /** Redis commands per call on all masters of the topology (INFO commandstats), multi-node passes. */
  redisCommandsPerCall?: number;
  /** Of those, what the nodes sent (a script once); heartbeats included (not net of idle). */
  redisSentPerCall?: number;
  redisTop?: Record<string, number>;
}

async function run(ctx: ScenarioContext): Promise<void> {
  const m = ctx.metrics;
  const calls = m.counter('calls');
  const errors = m.counter('errors');
  const all = m.trend('call_duration');
  const droppedCounter = m.counter('open_loop_dropped');
  const phases: Phase[] = [];
  const trends: Array<[string, Trend]> = [];
  const phoneCount = ctx.opts.phones ?? 30;
  const phaseS = Math.max(2, ctx.durationS / 4);
  let up = 0;
  ctx.setPhones(() => up);
  let first = true;

  // --target: one pass against what is there (phones and clients through the same URL).
  // Otherwise one node, then three nodes on each --redis-url (one Redis by default), each pass
  // counting Redis commands per call on every master of its topology.
  const passes: Array<{ nodes: number; redisUrl?: string }> = ctx.opts.target
    ? [{ nodes: 1 }]
    : [
        { nodes: 1 },
        ...(ctx.opts.redisUrls.length ? ctx.opts.redisUrls : [REDIS_URL]).map((u) => ({ nodes: 3, redisUrl: u })),
      ];
  for (const [pass, { nodes, redisUrl }] of passes.entries()) {
    const topo = redisUrl && nodes > 1 ? ` on ${parseRedisUrl(redisUrl).kind}` : '';
    // Metric names of the first multi-node pass stay as they were (thresholds name them).
    const tag = pass > 1 && redisUrl ? `_${parseRedisUrl(redisUrl).kind}${pass}` : '';
    ctx.setNote(`${nodes} node(s)${topo}: setup`);
    const t = ctx.opts.target ? await targetNode(ctx.opts.target) : undefined;
    const relays = t ? undefined : await startRelays({ nodes, redisUrl });
    const counter = relays && nodes > 1 && redisUrl ? await redisCounter(redisUrl) : undefined;
    const list: TargetNode[] = t ? [t.node] : relays!.nodes;
    ctx.figures.store = relays?.store.kind ?? 'target';
    const fleets: Population[] = [];
    const agent = clientAgent(256);
    try {
      for (let n = 0; n < nodes; n++) {
        const share = Math.ceil(phoneCount / nodes);
        fleets.push(await connectPhones({ relay: list[n], count: share, surface: loadSurface() }));
      }
      up = fleets.reduce((a, f) => a + f.connected(), 0);
      // Each phone gets a session on the *next* node: with three nodes every call crosses the bus.
      const sessions: McpSession[] = [];
      const phones = fleets.flatMap((f, n) => f.phones.map((p) => ({ p, n })));
      const keys = await list[0].keys(phones.map((x) => x.p.deviceId));
      await pool(phones.length, 16, async (i) => {
        const node = list[(phones[i].n + 1) % nodes];
        sessions[i] = await new McpSession(node.url, keys[i].token, agent).initialize();
      });
      if (first) ctx.beginLoad();
      first = false;
      const one = async (trend: Trend, i: number, dueAt: number) => {
        calls.add();
        try {
          const r = await sessions[i % sessions.length].call('echo', { mode: 'now', i });
          const ms = performance.now() - dueAt;
          if (r.status !== 200 || r.json?.error || !r.json?.result) throw new Error(JSON.stringify(r.json ?? r.status));
          trend.add(ms);
          all.add(ms);
        } catch (err) {
          errors.add();
          ctx.log(`call failed: ${(err as Error).message}`);
        }
      };
      const record = (
        name: string,
        trend: Trend,
        seconds: number,
        errs: number,
        redis?: { total: number; sent: number; top: Record<string, number> },
      ) => {
        const v = trend.values();
        phases.push({
          name: name + topo,
          callsPerS: v.count / seconds,
          p50: v.med,
          p99: v['p(99)'],
          errors: errs,
          redisCommandsPerCall: redis?.total,
          redisSentPerCall: redis?.sent,
          redisTop: redis?.top,
        });
        trends.push([name + topo, trend]);
      };

      // Closed loop.
      const closed = m.trend(`call_duration_${nodes}n${tag}_closed`);
      ctx.setNote(`${nodes} node(s): closed loop, ${CLOSED_CALLERS} callers`);
      let e0 = errors.count;
      let c0 = await counter?.count();
      let t0 = performance.now();
      const closedUntil = t0 + phaseS * 1000;
      await Promise.all(
        Array.from({ length: CLOSED_CALLERS }, async (_, w) => {
          for (let n = 0; performance.now() < closedUntil && n < 1_000_000; n++)
            await one(closed, w + n * CLOSED_CALLERS, performance.now());
        }),
      );
      const closedS = (performance.now() - t0) / 1000;
      const c1 = await counter?.count();
      record(
        `${nodes} node(s), closed loop`,
        closed,
        closedS,
        errors.count - e0,
        c0 && c1 && perCall(c0, c1, closed.count),
      );
      const closedRate = closed.count / closedS;

      // Open loop at half of what the closed loop reached (the cores are shared, so that varies).
      const rate = Math.max(10, Math.round(closedRate * 0.5));
      const open = m.trend(`call_duration_${nodes}n${tag}_open`);
      ctx.setNote(`${nodes} node(s): open loop at ${rate}/s`);
      ctx.figures[`open_loop_rate_${nodes}n${tag}`] = rate;
      e0 = errors.count;
      c0 = await counter?.count();
      t0 = performance.now();
      const openUntil = t0 + phaseS * 1000;
      let inFlight = 0;
      let dropped = 0;
      const running: Promise<void>[] = [];
      for (let n = 0; n < rate * phaseS * 2; n++) {
        const due = t0 + (n / rate) * 1000;
        if (due >= openUntil) break;
        const wait = due - performance.now();
        if (wait > 1) await sleep(wait);
        if (inFlight >= MAX_IN_FLIGHT) {
          // The system is not keeping up: the generator stops queueing (counted, not an error of the relay's).
          dropped++;
          droppedCounter.add();
          continue;
        }
        inFlight++;
        // From when it was due, or when it left if that was (by < 1 ms) earlier.
        running.push(one(open, n, Math.min(due, performance.now())).finally(() => inFlight--));
      }
      await Promise.all(running);
      const c2 = await counter?.count();
      record(
        `${nodes} node(s), open loop ${rate}/s`,
        open,
        phaseS,
        errors.count - e0,
        c0 && c2 && perCall(c0, c2, open.count),
      );
      ctx.figures[`open_loop_dropped_${nodes}n${tag}`] = dropped;
    } finally {
      await Promise.all(fleets.map((f) => f.closeAll()));
      agent.destroy();
      counter?.close();
      await relays?.dispose();
      await t?.close();
    }
  }
  ctx.figures.phases = phases;
  ctx.chart(
    'throughput-by-phase.svg',
    'Calls per second by phase',
    barChart(
      { title: 'throughput: calls/s', xLabel: 'phase', yLabel: 'calls/s' },
      phases.map((p) => ({ label: p.name.replace(' node(s), ', 'n ').replace(' loop', ''), value: p.callsPerS })),
    ),
  );
  ctx.chart(
    'percentiles-by-phase.svg',
    'Latency by percentile, per phase',
    lineChart(
      { title: 'throughput: latency by percentile', xLabel: 'percentile', yLabel: 'ms' },
      trends.map(([name, t]) => ({ name, points: t.curve() })),
    ),
  );
}

export const scenario: Scenario = {
  name: 'throughput',
  description:
    'Small tools/calls, closed loop and open loop (fixed arrival rate), on one node and on three nodes over Redis with clients and phones on different nodes.',
  defaultDurationS: 120,
  thresholds: ['errors:count==0', 'calls:count>0'],
  run,
};
