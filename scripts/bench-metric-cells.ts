// Per-call cost of a metric update: prom-client's bound label children against the cells of
// src/metric-cells.ts (docs/decisions/0120-metric-cells.md). `node --import tsx scripts/bench-metric-cells.ts`;
// the figures are in docs/BENCHMARKS.md ("Metrics on the per-call path").
import { PerformanceObserver } from 'node:perf_hooks';
import client from 'prom-client';
import { CellCounter, CellHistogram } from '../src/metric-cells.ts';
import { LATENCY_BUCKETS } from '../src/metrics.ts';

const N = Number(process.env.BENCH_N ?? 5_000_000);
const registry = new client.Registry();
const counter = new client.Counter({ name: 'a_total', help: 'h', labelNames: ['side'], registers: [registry] });
const histogram = new client.Histogram({
  name: 'b_seconds',
  help: 'h',
  labelNames: ['kind'],
  buckets: [...LATENCY_BUCKETS],
  registers: [registry],
});
const cells = new CellCounter({ name: 'c_total', help: 'h', labelNames: ['side'], registers: [registry] });
const timings = new CellHistogram({
  name: 'd_seconds',
  help: 'h',
  labelNames: ['kind'],
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
const child = counter.labels({ side: 'phone' });
const hChild = histogram.labels({ kind: 'select' });
const cell = cells.cell({ side: 'phone' });
const timing = timings.cell({ kind: 'select' });

// Garbage collections during a run: none means the calls allocated nothing on the heap.
let gcs = 0;
new PerformanceObserver((list) => (gcs += list.getEntries().length)).observe({ entryTypes: ['gc'] });
const tick = () => new Promise((r) => setImmediate(r));

async function run(name: string, f: (i: number) => void): Promise<void> {
  for (let i = 0; i < 100_000; i++) f(i); // warm-up: optimised code only
  await tick();
  gcs = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) f(i);
  const ns = Number(process.hrtime.bigint() - t0) / N;
  await tick();
  console.log(`${name.padEnd(40)} ${ns.toFixed(1).padStart(7)} ns/call, ${gcs} GCs in ${N} calls`);
}

await run('prom-client counter child .inc()', () => child.inc());
await run('cell counter .inc()', () => cell.inc());
await run('prom-client histogram child .observe()', (i) => hChild.observe((i % 1000) / 1e5));
await run('cell histogram .observe()', (i) => timing.observe((i % 1000) / 1e5));
