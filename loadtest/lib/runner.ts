// Runs one scenario: the clock and its bound, progress, cleanup, thresholds, the summary and
// the report. Returns the exit code: 0 passed, 99 a threshold failed (as k6), 1 the scenario failed.
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { MetricSet, Trend } from './metrics.ts';
import type { CommonOptions } from './options.ts';
import { startProgress } from './progress.ts';
import { summaryText, writeReport, type Report } from './report.ts';
import type { Scenario, ScenarioContext, Target } from './scenario.ts';
import { lineChart } from './svg.ts';
import { evaluateThreshold, parseThreshold } from './thresholds.ts';

export const EXIT_THRESHOLD_FAILED = 99;

/** Where a run's report.json, report.md and charts go: --out, else loadtest-results/<scenario>. */
export function reportDir(opts: CommonOptions, scenario: string): string {
  return opts.out ?? join('loadtest-results', scenario);
}

export async function runScenario(scenario: Scenario, opts: CommonOptions, command: string): Promise<number> {
  const durationS = opts.durationS ?? scenario.defaultDurationS;
  const metrics = new MetricSet();
  const startedAt = new Date();
  const figures: Record<string, unknown> = {};
  const targets: Target[] = [];
  const charts = new Map<string, string>();
  const chartList: Report['charts'] = [];
  const notes: string[] = [];
  const deferred: Array<() => unknown> = [];
  let phones: () => number = () => 0;
  let note = '';
  let logged = 0;
  let stopped = false;
  const load0 = loadavg();
  const stopProgress = startProgress({ metrics, phones: () => phones(), note: () => note });
  const ctx: ScenarioContext = {
    opts,
    durationS,
    metrics,
    figures,
    setPhones: (n) => (phones = typeof n === 'function' ? n : () => n),
    setNote: (n) => (note = n),
    target: (t) => targets.push(t),
    chart: (file, title, svg) => {
      charts.set(file, svg);
      chartList.push({ file, title });
    },
    note: (line) => notes.push(line),
    defer: (fn) => deferred.push(fn),
    deadline: performance.now() + durationS * 1000,
    beginLoad: () => {
      if (!stopped) ctx.deadline = performance.now() + durationS * 1000;
    },
    log: (line) => {
      // A broken run can fail thousands of calls alike: the first few say what is wrong.
      if (++logged <= 20) process.stderr.write(`\n[${scenario.name}] ${line}\n`);
      else if (logged === 21) process.stderr.write(`\n[${scenario.name}] (further lines suppressed)\n`);
    },
  };
  // Setup (pairing thousands of phones) is not in --duration; the bound covers it generously.
  const boundS = scenario.boundS?.(opts, durationS) ?? Math.max(600, durationS * 3 + 300);
  let error: string | undefined;
  let bound: NodeJS.Timeout | undefined;
  const interrupted = () => {
    stopped = true;
    ctx.deadline = performance.now();
    ctx.log('interrupted: finishing early');
  };
  process.once('SIGINT', interrupted);
  try {
    await Promise.race([
      scenario.run(ctx),
      new Promise<never>((_, reject) => {
        bound = setTimeout(() => reject(new Error(`scenario exceeded its bound of ${boundS} s`)), boundS * 1000);
      }),
    ]);
  } catch (err) {
    error = (err as Error).stack ?? String(err);
  } finally {
    clearTimeout(bound);
    process.off('SIGINT', interrupted);
    stopProgress();
  }
  for (const fn of deferred.reverse()) {
    try {
      await fn();
    } catch (err) {
      notes.push(`cleanup failed: ${(err as Error).message}`);
    }
  }

  const call = metrics.all().find((m) => m.name === 'call_duration');
  if (call instanceof Trend && call.count) {
    const s = call.series();
    charts.set(
      'latency-over-time.svg',
      lineChart({ title: `${scenario.name}: call latency over time`, xLabel: 'seconds', yLabel: 'ms' }, [
        { name: 'p50', points: s.map((p) => [p.t, p.p50]) },
        { name: 'p99', points: s.map((p) => [p.t, p.p99]) },
      ]),
    );
    charts.set(
      'percentiles.svg',
      lineChart({ title: `${scenario.name}: call latency by percentile`, xLabel: 'percentile', yLabel: 'ms' }, [
        { name: 'call_duration', points: call.curve() },
      ]),
    );
    chartList.unshift(
      { file: 'latency-over-time.svg', title: 'Call latency over time' },
      { file: 'percentiles.svg', title: 'Call latency by percentile' },
    );
  }

  const views = metrics.views();
  const all = [...scenario.thresholds.map(parseThreshold), ...opts.thresholds];
  const verdicts = all.map((t) => evaluateThreshold(t, views));
  const passed = !error && verdicts.every((v) => v.ok);
  const report: Report = {
    scenario: scenario.name,
    description: scenario.description,
    command,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    durationS: metrics.elapsedS(),
    passed,
    error,
    environment: {
      node: process.version,
      cpus: cpus().length,
      memoryMiB: Math.round(totalmem() / 2 ** 20),
      loadAverageAtStart: load0.map((l) => +l.toFixed(2)),
      loadAverageAtEnd: loadavg().map((l) => +l.toFixed(2)),
      target: opts.target ?? 'local (127.0.0.1)',
    },
    options: { ...opts, thresholds: opts.thresholds.map((t) => t.source), durationS },
    figures,
    metrics: Object.fromEntries(Object.entries(views).map(([k, v]) => [k, { type: v.type, values: v.values }])),
    targets,
    thresholds: verdicts,
    charts: chartList,
    notes,
  };
  const dir = reportDir(opts, scenario.name);
  writeReport(dir, report, charts);
  process.stdout.write(summaryText(report));
  process.stdout.write(`  report: ${join(dir, 'report.md')}\n`);
  return error ? 1 : passed ? 0 : EXIT_THRESHOLD_FAILED;
}
