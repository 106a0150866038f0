// relay-overhead under the load tool's common command line (docs/OPERATIONS.md, "Load tests
// and sizing"):
//   npm run loadtest -- relay-overhead [--duration S] [--out DIR] [--threshold 'EXPR']…
//                                      [--phones N] [--time-scale F] [--redis-url URL]…
//                                      [--rounds N] [--round-ms MS] [--conns N] [--no-cluster] [--no-strace]
//                                      [--low-rate N] [--cpu-prof DIR] [--runs N]
//                                      [--cpu-limit CORES] [--limit-conns N]
// The measurement itself is loadtest/relay-overhead.ts, run as a child process as before (its
// own processes, bound and report, also runnable alone: docs/BENCHMARKS.md, "Relay overhead");
// this module maps the common flags onto it and turns its report into the runner's:
//   --duration S     the length of each measured round (its --round-ms, 0.5–10 s; default 3)
//   --threshold      evaluated on the metrics below, as every scenario's: a failure exits 99
//   --phones N       not applicable: the measure is one phone per target; accepted and noted
//   --time-scale F   not applicable: no protocol limit is waited for; accepted and noted
//   --redis-url URL  repeatable: the two-node targets per topology (any topology)
//   --target URL     refused (exit 64): it reads the CPU of servers it starts on this machine
// Metrics for thresholds: a gauge `<target>.<figure>` for every number of a target in
// DIR/measured/report.json (`relay.callsPerSecond`, `relay.netServerCpuUsPerCall`,
// `cluster.lowRateP50Ms`, …; a target's name with every character other than a letter, digit
// or `_` as `_`: `same_node`, `floor_cluster`; with --runs, `value` is the last run's, `min`
// and `max` over the runs), counters `errors` (failed calls, every target and run),
// `checks_missed` and `checks_met`. The checks of docs/BENCHMARKS.md are the report's targets;
// a missed one fails the run (exit 1), as the measurement alone does.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError, type CommonOptions } from './lib/options.ts';
import { reportDir } from './lib/runner.ts';
import { checkLine, medianOf, type RunCheck } from './lib/runs.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import { barChart } from './lib/svg.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MEASURE = 'loadtest/relay-overhead.ts';
/** loadtest/relay-overhead.ts clamps --round-ms to this range. */
const ROUND_MS = { min: 500, max: 10_000, default: 3000 };

type Json = any;

const ownFlag = (v: string | boolean | string[] | undefined): string | undefined =>
  typeof v === 'string' ? v : undefined;

/** The round length --duration (or --round-ms) asks for, in ms, within what the measurement takes. */
function roundMs(opts: CommonOptions): { ms: number; asked?: number } {
  const raw = opts.durationS !== undefined ? opts.durationS * 1000 : Number(ownFlag(opts.extra['round-ms']));
  if (!Number.isFinite(raw)) return { ms: ROUND_MS.default };
  const ms = Math.round(Math.max(ROUND_MS.min, Math.min(ROUND_MS.max, raw)));
  return { ms, asked: raw };
}

function runsOf(opts: CommonOptions): number {
  return Math.max(1, Math.min(5, Math.floor(Number(ownFlag(opts.extra.runs) ?? 1)) || 1));
}

/** The child's command line: its own flags as given, the round length, the topologies, DIR/measured. */
function childArgs(opts: CommonOptions, out: string): string[] {
  const args: string[] = [];
  for (const [k, v] of Object.entries(opts.extra)) {
    if (k === 'round-ms' || v === undefined || v === false) continue;
    args.push(`--${k}`, ...(v === true ? [] : typeof v === 'string' ? [v] : v));
  }
  args.push('--round-ms', String(roundMs(opts).ms));
  for (const u of opts.redisUrls) args.push('--redis-url', u);
  args.push('--out', out);
  return args;
}

const metricName = (s: string) => s.replace(/[^A-Za-z0-9_]/g, '_');

/** Every number of a target's figures, one level of objects flattened (`atCpuLimit.callsPerSecond`). */
function numbers(figures: Json, prefix = ''): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  for (const [k, v] of Object.entries(figures ?? {})) {
    if (typeof v === 'number' && Number.isFinite(v)) out.push([`${prefix}${k}`, v]);
    else if (!prefix && v && typeof v === 'object' && !Array.isArray(v)) out.push(...numbers(v, `${k}.`));
  }
  return out;
}

async function measure(ctx: ScenarioContext, out: string): Promise<number | null> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', MEASURE, ...childArgs(ctx.opts, out)], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  // The runner's bound or an error here: the child stops its own processes on SIGINT.
  ctx.defer(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGINT');
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(kill);
  });
  return exited;
}

async function run(ctx: ScenarioContext): Promise<void> {
  const o = ctx.opts;
  const runs = runsOf(o);
  const { ms, asked } = roundMs(o);
  const out = resolve(join(reportDir(o, 'relay-overhead'), 'measured'));
  const file = join(out, 'report.json');
  rmSync(file, { force: true }); // an earlier run's report must not stand in for this one's
  if (asked !== undefined && asked !== ms)
    ctx.note(`rounds of ${asked / 1000} s asked for; the measurement takes 0.5–10 s: ran rounds of ${ms / 1000} s`);
  if (o.phones !== undefined)
    ctx.note(`--phones ${o.phones} not applicable: relay-overhead measures one phone per target (ignored)`);
  if (o.timeScale !== 1)
    ctx.note(`--time-scale ${o.timeScale} not applicable: relay-overhead waits for no protocol limit (ignored)`);
  ctx.figures.roundS = ms / 1000;
  ctx.figures.runs = runs;
  ctx.figures.measuredReport = file;
  ctx.setPhones(1);
  ctx.setNote(`measuring (${MEASURE})`);
  const code = await measure(ctx, out);
  // It exits 1 on a missed check and still writes its report; without one it failed.
  if (!existsSync(file)) throw new Error(`${MEASURE} failed (exit ${code}) and wrote no report`);
  const report: Json = JSON.parse(readFileSync(file, 'utf8'));
  const perRun: Json[] =
    runs > 1
      ? Array.from({ length: runs }, (_, k) => join(out, `run-${k + 1}`, 'report.json'))
          .filter((f) => existsSync(f))
          .map((f) => JSON.parse(readFileSync(f, 'utf8')))
      : [report];

  const errors = ctx.metrics.counter('errors');
  for (const r of perRun)
    for (const [name, figures] of Object.entries<Json>(r.targets ?? {})) {
      errors.add(Number(figures.errors) || 0);
      for (const [k, v] of numbers(figures)) ctx.metrics.gauge(`${metricName(name)}.${k}`).set(v);
    }
  const last = perRun[perRun.length - 1] ?? {};
  ctx.figures.settings = runs > 1 ? perRun.map((r) => r.settings) : report.settings;
  if (last.floor) ctx.figures.floor = last.floor;
  if (last.clusterFloor) ctx.figures.clusterFloor = last.clusterFloor;

  const missed = ctx.metrics.counter('checks_missed');
  const met = ctx.metrics.counter('checks_met');
  const checks: RunCheck[] = report.checks ?? [];
  for (const c of checks) {
    ctx.note(checkLine(c));
    if (c.ok === null) continue;
    (c.ok ? met : missed).add();
    ctx.target({
      name: c.name,
      goal: c.atMost === undefined ? `${c.limit}` : `${c.atMost ? '≤' : '≥'} ${c.limit}`,
      actual: c.value ?? NaN,
      unit: runs > 1 ? `(median of ${runs} runs)` : '',
      met: c.ok,
    });
  }

  // Charts: the median over runs of each target's figure.
  const targetNames = [...new Set(perRun.flatMap((r) => Object.keys(r.targets ?? {})))];
  const bars = (field: string) =>
    targetNames.map((name) => ({
      label: name,
      value: medianOf(perRun.map((r) => Number(r.targets?.[name]?.[field])).filter((x) => Number.isFinite(x))),
    }));
  const chart = (file: string, title: string, yLabel: string, field: string) =>
    ctx.chart(file, title, barChart({ title: `relay-overhead: ${title}`, xLabel: 'target', yLabel }, bars(field)));
  chart('calls-per-second.svg', 'closed-loop calls/s per target', 'calls/s', 'callsPerSecond');
  chart('cpu-per-call.svg', 'server CPU per small call, net of idle', 'µs', 'netServerCpuUsPerCall');
  chart('low-rate-p50.svg', 'p50 at half the slowest peak', 'ms', 'lowRateP50Ms');
  chart('low-rate-p99.svg', 'p99 at half the slowest peak', 'ms', 'lowRateP99Ms');

  if (code !== 0 && code !== 1) throw new Error(`${MEASURE} exited ${code}`);
  if (missed.count > 0)
    throw new Error(`${missed.count} of ${missed.count + met.count} checks missed (report.md, "Targets")`);
}

export const scenario: Scenario = {
  name: 'relay-overhead',
  description:
    'What the relay costs per call beside a baseline relay, the uWS floor, the phone\'s own server and two nodes over Redis per topology, in alternating rounds (docs/BENCHMARKS.md, "Relay overhead")',
  defaultDurationS: ROUND_MS.default / 1000,
  thresholds: [],
  options: {
    rounds: { type: 'string' },
    'round-ms': { type: 'string' },
    conns: { type: 'string' },
    'no-cluster': { type: 'boolean' },
    'no-strace': { type: 'boolean' },
    'low-rate': { type: 'string' },
    'cpu-prof': { type: 'string' },
    runs: { type: 'string' },
    'cpu-limit': { type: 'string' },
    'limit-conns': { type: 'string' },
  },
  refusesTarget:
    'it measures the CPU of the relay processes it starts, beside a baseline, the uWS floor and the phone on this machine',
  validate(opts) {
    if (opts.durationS !== undefined && opts.extra['round-ms'] !== undefined)
      throw new UsageError('relay-overhead: --duration is the round length: give it or --round-ms, not both');
  },
  // Its own bound per run (loadtest/relay-overhead.ts: 8 minutes, 2 more per further topology), and a minute.
  boundS: (opts) => runsOf(opts) * (8 + 2 * Math.max(0, opts.redisUrls.length - 1)) * 60 + 60,
  run,
};
