// Contract (docs/OPERATIONS.md, "Load tests and sizing"):
//   `npm run loadtest -- <scenario> [--duration S] [--out DIR] [--threshold 'EXPR']… [--target URL]
//    [--phones N] [--time-scale F]` — scenarios include `relay-overhead`, … ; writes `report.json`,
//   `report.md` and SVG charts to DIR; exits non-zero when a threshold fails.
// relay-overhead takes the common flags (loadtest/relay-overhead-scenario.ts): --duration is its
// round length, --threshold is evaluated on its metrics, --phones and --time-scale are accepted
// and noted as not applicable; the shared writer (loadtest/lib/report.ts) writes its report.
// One short whole run (rounds of 0.5 s, one of each, no cluster, no strace, no CPU limit):
// about 25 s on a quiet 2-core machine, under a minute on a loaded one.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadtest } from './contract-helpers.ts';

const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const out = mkdtempSync(join(tmpdir(), 'pb-loadtest-ro-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('npm run loadtest -- relay-overhead with the common flags', () => {
  it('takes --duration (with its own flags), --threshold, --phones, --time-scale and --redis-url, and writes report.json, report.md and SVG charts', async () => {
    const r = await loadtest(
      [
        'relay-overhead',
        ...['--duration', '0.5', '--out', out, '--phones', '3', '--time-scale', '2', '--redis-url', REDIS_URL],
        ...['--threshold', 'errors:count==0', '--threshold', 'relay.callsPerSecond:value<0'],
        ...['--rounds', '1', '--no-cluster', '--no-strace', '--cpu-limit', '0'],
      ],
      150_000,
    );
    expect(r.out).not.toMatch(/Unknown option/);
    const rep = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
    // The measurement completed: any error is a missed check of docs/BENCHMARKS.md (exit 1),
    // which a 0.5 s round on a shared machine may well see; else the failed threshold's 99.
    if (rep.error) {
      expect(rep.error).toMatch(/checks missed/);
      expect(r.code).toBe(1);
    } else expect(r.code).toBe(99);
    expect(rep.passed).toBe(false);
    // --duration is the round length; the measurement's own report beside the runner's.
    expect(rep.options.durationS).toBe(0.5);
    expect(rep.figures.roundS).toBe(0.5);
    const measured = JSON.parse(readFileSync(join(out, 'measured', 'report.json'), 'utf8'));
    expect(measured.settings).toMatchObject({ rounds: 1, roundMs: 500 });
    expect(Object.keys(measured.targets)).toEqual(['relay', 'floor', 'baseline', 'direct']);
    // The CPU-against-baseline checks print the uWS floor's own ratio beside the relay's: a
    // limit the floor itself misses is missed by any relay on this stack.
    const T = measured.targets;
    const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
    const checkNamed = (name: string) => measured.checks.find((c: { name: string }) => c.name === name);
    expect(checkNamed('relay CPU per call / baseline')).toMatchObject({
      floorName: "the uWS floor's",
      floor: ratio(T.floor.serverCpuUsPerCall, T.baseline.serverCpuUsPerCall),
    });
    expect(checkNamed('relay CPU per call / baseline, net of idle')).toMatchObject({
      floorName: "the uWS floor's",
      floor: ratio(T.floor.netServerCpuUsPerCall, T.baseline.netServerCpuUsPerCall),
    });
    // Per round, what of each target's CPU ran off its main threads (V8's compiler and
    // collector, libuv's pool), and the same-rate figure each round gave: one entry per round,
    // a share of the round's own CPU; per idle window, the idle rate.
    interface PerRound {
      serverCpuUsPerCall: number;
      lowRateNetServerCpuUsPerCall: number;
      helperCpuUsPerCallByRound: number[];
      lowRateHelperCpuUsPerCallByRound: number[];
      lowRateNetServerCpuUsPerCallByRound: number[];
      lowRateServerCpuUsPerCall: number;
      idleCpuPercent: number;
      idleCpuPercentByWindow: number[];
    }
    for (const t of Object.values<PerRound>(T)) {
      expect(t.helperCpuUsPerCallByRound).toHaveLength(1);
      expect(t.helperCpuUsPerCallByRound[0]).toBeGreaterThanOrEqual(0);
      expect(t.helperCpuUsPerCallByRound[0]).toBeLessThanOrEqual(t.serverCpuUsPerCall);
      expect(t.lowRateHelperCpuUsPerCallByRound).toHaveLength(1);
      expect(t.lowRateNetServerCpuUsPerCallByRound).toEqual([t.lowRateNetServerCpuUsPerCall]);
      // The idle rate taken off is the median of three windows (after the warm-up, before and
      // after the same-rate rounds), each reported.
      expect(t.idleCpuPercentByWindow).toHaveLength(3);
      for (const x of t.idleCpuPercentByWindow) expect(x).toBeGreaterThanOrEqual(0);
      expect(t.idleCpuPercent).toBe([...t.idleCpuPercentByWindow].sort((a, b) => a - b)[1]);
      // The same round with nothing taken off: no less than the net figure.
      expect(t.lowRateServerCpuUsPerCall).toBeGreaterThanOrEqual(t.lowRateNetServerCpuUsPerCall);
    }
    // The same-rate ratios with nothing taken off, reported beside the net ones (no cluster here).
    expect(measured.withNothingTakenOffAtSameRate).toEqual({
      relayOverFloor: ratio(T.relay.lowRateServerCpuUsPerCall, T.floor.lowRateServerCpuUsPerCall),
      clusterOverRelay: null,
      floorClusterOverFloor: null,
    });
    // The thresholds, through the shared evaluator, on its metrics.
    const verdict = (t: string) => rep.thresholds.find((v: { threshold: string }) => v.threshold === t);
    expect(verdict('errors:count==0')).toMatchObject({ ok: true, actual: 0 });
    expect(verdict('relay.callsPerSecond:value<0')).toMatchObject({ ok: false });
    expect(verdict('relay.callsPerSecond:value<0').actual).toBe(measured.targets.relay.callsPerSecond);
    expect(rep.notes.join('\n')).toMatch(/--phones 3 not applicable/);
    expect(rep.notes.join('\n')).toMatch(/--time-scale 2 not applicable/);
    // report.md and the SVG charts, as every scenario's.
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).toMatch(/^# Load test: relay-overhead/);
    expect(md).toContain('`relay.callsPerSecond:value<0`');
    const svgs = readdirSync(out).filter((f) => f.endsWith('.svg'));
    expect(svgs).toEqual(expect.arrayContaining(['calls-per-second.svg', 'cpu-per-call.svg']));
    for (const f of svgs) {
      expect(readFileSync(join(out, f), 'utf8')).toMatch(/<svg[\s\S]*<\/svg>\s*$/);
      expect(md).toContain(`](${f})`);
    }
  }, 160_000);

  it('refuses --duration with --round-ms (both are the round length) as a usage error', async () => {
    const dir = join(out, 'both');
    const r = await loadtest(['relay-overhead', '--duration', '1', '--round-ms', '1000', '--out', dir], 30_000);
    expect(r.code).toBe(64);
    expect(r.out).toMatch(/--duration is the round length: give it or --round-ms, not both/);
    expect(existsSync(join(dir, 'report.json'))).toBe(false);
  }, 40_000);
});
