// soak: mixed traffic for 10 minutes (× --time-scale, or --duration) with phones and clients
// coming and going: client sessions open, make calls and end (DELETE); phones drop and
// reconnect. The relay's heap, RSS, handles and pending state are sampled (after GC, from the
// relay process) and must stay flat: the heap's slope is reported against its own noise.
// The only errors allowed are the ones the scenario provokes (calls to a phone while it is away).
import { clientAgent, McpSession } from './lib/mcp-client.ts';
import { connectPhones } from './lib/phones.ts';
import { loadSurface, type CallContext } from './lib/light-phone.ts';
import { SESSION_CHURN_FLAGS, startRelays } from './lib/relay.ts';
import type { RelayStats } from './fleet-relay.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import { lineChart } from './lib/svg.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MIB = 2 ** 20;

/** Least-squares line through (x, y): slope, and the standard deviation of the residuals. */
export function fitLine(points: Array<[number, number]>): { slope: number; intercept: number; noise: number } {
  const n = points.length;
  if (n < 2) return { slope: NaN, intercept: NaN, noise: NaN };
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  const sxx = points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
  const sxy = points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0);
  const slope = sxx ? sxy / sxx : 0;
  const intercept = my - slope * mx;
  const noise = Math.sqrt(points.reduce((a, p) => a + (p[1] - (intercept + slope * p[0])) ** 2, 0) / n);
  return { slope, intercept, noise };
}

async function run(ctx: ScenarioContext): Promise<void> {
  const m = ctx.metrics;
  const soakS = ctx.opts.durationS ?? 600 * ctx.opts.timeScale;
  const calls = m.counter('calls');
  const errors = m.counter('errors');
  const provoked = m.counter('provoked_errors');
  const duration = m.trend('call_duration');
  const phoneCount = ctx.opts.phones ?? 40;
  const away = new Set<string>();

  const onCall = (call: CallContext) => {
    if (call.args.mode === 'slow') setTimeout(() => call.reply({ content: [{ type: 'text', text: 'slow' }] }), 50);
    else call.reply({ content: [{ type: 'text', text: 'ok' }] });
  };
  // Eight clients on one address open a session every few calls.
  const relays = await startRelays({ flags: SESSION_CHURN_FLAGS });
  ctx.defer(() => relays.dispose());
  const node = relays.nodes[0];
  ctx.figures.store = relays.store.kind;
  const fleet = await connectPhones({ relay: node, count: phoneCount, surface: loadSurface(), onCall });
  ctx.defer(() => fleet.closeAll());
  ctx.setPhones(() => fleet.connected());
  const keys = await node.keys(fleet.phones.map((p) => p.deviceId));
  const agent = clientAgent(64);
  ctx.defer(() => agent.destroy());

  ctx.beginLoad();
  ctx.deadline = performance.now() + soakS * 1000;
  const t0 = performance.now();
  const samples: Array<{ t: number; s: RelayStats }> = [];
  const sampleEvery = Math.max(1000, (soakS * 1000) / 60);
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      samples.push({ t: (performance.now() - t0) / 1000, s: await node.stats() });
      await sleep(sampleEvery);
    }
  })();

  // Phones come and go: one at a time drops (1000) and comes back a second later.
  const churn = (async () => {
    for (let i = 0; performance.now() < ctx.deadline && i < 100_000; i++) {
      await sleep(2000);
      const phone = fleet.phones[(i * 7) % phoneCount];
      away.add(phone.deviceId);
      await phone.close();
      await sleep(1000);
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          await phone.connect();
          break;
        } catch {
          await sleep(500);
        }
      }
      // A moment for the relay to finish its side of the handshake before calls count again.
      await sleep(200);
      away.delete(phone.deviceId);
    }
  })();

  // Clients come and go: a session, 20 calls, DELETE; eight clients at a time.
  let sessionsEnded = 0;
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let round = 0; performance.now() < ctx.deadline && round < 100_000; round++) {
        const i = (w + round * 8) % phoneCount;
        const deviceId = fleet.phones[i].deviceId;
        let s: McpSession;
        try {
          s = await new McpSession(node.url, keys[i].token, agent).initialize();
        } catch (err) {
          errors.add();
          ctx.log(`session failed: ${(err as Error).message}`);
          continue;
        }
        for (let n = 0; n < 20 && performance.now() < ctx.deadline; n++) {
          calls.add();
          const t = performance.now();
          const wasAway = away.has(deviceId);
          try {
            const r = await s.call('echo', { mode: n % 5 === 0 ? 'slow' : 'now' });
            if (r.json?.result) duration.add(performance.now() - t);
            else if (r.json?.error?.data?.code === 'device_offline' && (wasAway || away.has(deviceId))) provoked.add();
            else throw new Error(JSON.stringify(r.json ?? r.status));
          } catch (err) {
            errors.add();
            ctx.log(`call failed: ${(err as Error).message}`);
          }
        }
        if ((await s.end()) < 300) sessionsEnded++;
      }
    }),
  );
  await churn;
  sampling = false;
  await sampler;
  // Settled: nothing in flight, then the last sample.
  for (let i = 0; i < 50 && (await node.stats()).pending > 0; i++) await sleep(100);
  const last = await node.stats();
  samples.push({ t: (performance.now() - t0) / 1000, s: last });
  ctx.figures.sessions_ended = sessionsEnded;
  ctx.figures.samples = samples.length;

  // The slope after a warm-up fifth, per minute, against the residuals' noise.
  const steady = samples.filter((x) => x.t >= soakS * 0.2);
  const fit = (f: (s: RelayStats) => number) => fitLine(steady.map((x) => [x.t / 60, f(x.s)]));
  const heap = fit((s) => s.heapUsed / MIB);
  const rss = fit((s) => s.rss / MIB);
  const handles = fit((s) => Object.values(s.handles).reduce((a, b) => a + b, 0));
  const minutes = steady.length > 1 ? (steady[steady.length - 1].t - steady[0].t) / 60 : 0;
  ctx.figures.heap_slope_mib_per_min = heap.slope;
  ctx.figures.heap_noise_mib = heap.noise;
  ctx.figures.rss_slope_mib_per_min = rss.slope;
  ctx.figures.handles_slope_per_min = handles.slope;
  ctx.figures.first = samples[0]?.s;
  ctx.figures.last = last;
  m.gauge('leaked_pending').set(last.pending);
  const drift = Math.abs(heap.slope * minutes);
  ctx.target({
    name: 'heap drift over the steady part (slope × time)',
    goal: `within noise (≤ max(2σ, 1 MiB) = ${Math.max(2 * heap.noise, 1).toFixed(2)} MiB)`,
    actual: drift,
    unit: 'MiB',
    met: drift <= Math.max(2 * heap.noise, 1),
  });
  ctx.chart(
    'memory-over-time.svg',
    'Relay memory over the soak (after GC)',
    lineChart({ title: 'soak: relay memory (after GC)', xLabel: 'seconds', yLabel: 'MiB' }, [
      { name: 'heap used', points: samples.map((x) => [x.t, x.s.heapUsed / MIB]) },
      { name: 'RSS', points: samples.map((x) => [x.t, x.s.rss / MIB]) },
    ]),
  );
  ctx.chart(
    'handles-over-time.svg',
    'Relay handles and pending requests over the soak',
    lineChart({ title: 'soak: relay handles and pending requests', xLabel: 'seconds', yLabel: 'count' }, [
      { name: 'handles', points: samples.map((x) => [x.t, Object.values(x.s.handles).reduce((a, b) => a + b, 0)]) },
      { name: 'pending', points: samples.map((x) => [x.t, x.s.pending]) },
      { name: 'phone sockets', points: samples.map((x) => [x.t, x.s.devices]) },
    ]),
  );
}

export const scenario: Scenario = {
  name: 'soak',
  description:
    'Mixed traffic with clients and phones coming and going for 10 minutes (× --time-scale); the relay’s memory, handles and pending state stay flat.',
  defaultDurationS: 600,
  thresholds: ['errors:count==0', 'leaked_pending:value==0', 'calls:count>0'],
  run,
  refusesTarget: 'it samples the memory and handles of the relay process it starts',
};
