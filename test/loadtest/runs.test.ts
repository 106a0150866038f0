import { describe, expect, it } from 'vitest';
import { checkLine, medianChecks, medianOf, type RunCheck } from '../../loadtest/lib/runs.ts';

const atMost = (name: string, value: number, limit: number, floor?: number): RunCheck => ({
  name,
  value,
  limit,
  atMost: true,
  ok: value <= limit,
  ...(floor === undefined ? {} : { floor }),
});
const atLeast = (name: string, value: number, limit: number): RunCheck => ({
  name,
  value,
  limit,
  atMost: false,
  ok: value >= limit,
});

describe('checks over several runs', () => {
  it('takes the median, the middle two averaged for an even count', () => {
    expect(medianOf([3, 1, 2])).toBe(2);
    expect(medianOf([4, 1, 3, 2])).toBe(2.5);
    expect(medianOf([])).toBeNaN();
  });

  it('decides each check on the median of its runs, not on any one run', () => {
    const [share, ratio] = medianChecks([
      [atLeast('share', 0.82, 0.7), atMost('ratio', 1.29, 1.3, 1.1)],
      [atLeast('share', 0.63, 0.7), atMost('ratio', 1.63, 1.3, 1.3)],
      [atLeast('share', 0.69, 0.7), atMost('ratio', 1.5, 1.3, 1.2)],
    ]);
    // One run met each, but the median misses both.
    expect(share).toMatchObject({ value: 0.69, ok: false, met: 1, decided: 3, values: [0.82, 0.63, 0.69] });
    expect(ratio).toMatchObject({ value: 1.5, ok: false, met: 1, floor: 1.2 });
    const [met] = medianChecks([
      [atLeast('share', 0.72, 0.7)],
      [atLeast('share', 0.69, 0.7)],
      [atLeast('share', 0.75, 0.7)],
    ]);
    expect(met).toMatchObject({ value: 0.72, ok: true, met: 2, decided: 3 });
  });

  it('decides on each run’s unrounded figure where the run wrote it, not on its two-place print', () => {
    // Three runs that each read 0.6996 or less and printed 0.7 or 0.69: each missed 0.7.
    const run = (exact: number): RunCheck => ({
      ...atLeast('share', Math.round(exact * 100) / 100, 0.7),
      exact,
      ok: exact >= 0.7,
    });
    const [share] = medianChecks([[run(0.6996)], [run(0.6912)], [run(0.6998)]]);
    expect(share).toMatchObject({ value: 0.7, exact: 0.6996, ok: false, met: 0, values: [0.7, 0.69, 0.7] });
    const [met] = medianChecks([[run(0.7004)], [run(0.6912)], [run(0.7001)]]);
    expect(met).toMatchObject({ value: 0.7, ok: true, met: 2 });
  });

  it('fails on errors in any run, and keeps a check no run decided as not applicable', () => {
    const errors: RunCheck = { name: 'relay: no errors', value: 3, limit: 0, ok: false };
    const na: RunCheck = { name: 'added p50', value: null, limit: 0.3, ok: null, why: 'direct is too slow' };
    const merged = medianChecks([[atLeast('share', 0.8, 0.7), na], [atLeast('share', 0.8, 0.7), na, errors], [na]]);
    expect(merged.map((c) => c.name)).toEqual(['share', 'added p50', 'relay: no errors']);
    expect(merged[0]).toMatchObject({ ok: true, decided: 2, values: [0.8, 0.8, null] });
    expect(merged[1]).toMatchObject({ ok: null, value: null, why: 'direct is too slow' });
    expect(merged[2]).toMatchObject({ ok: false, met: 0, decided: 1 });
  });

  it('decides on the runs that applied a check when others did not', () => {
    const na: RunCheck = { name: 'p50', value: null, limit: 0.3, ok: null, why: 'too slow' };
    const [c] = medianChecks([[na], [atMost('p50', 0.2, 0.3)], [atMost('p50', 0.4, 0.3)]]);
    expect(c).toMatchObject({ value: 0.3, ok: true, values: [null, 0.2, 0.4], met: 1, decided: 2 });
    // The median between two runs (1.305) decides, not its two-place print.
    const [above] = medianChecks([[atMost('ratio', 1.3, 1.3)], [atMost('ratio', 1.31, 1.3)]]);
    expect(above.ok).toBe(false);
  });
});

describe('a check as printed', () => {
  it('gives one run its value, and a merged check each run’s value and how many met it', () => {
    expect(checkLine(atLeast('share', 0.69, 0.7))).toBe('MISS share: 0.69 (limit 0.7)');
    expect(checkLine({ ...atMost('p50', 0.2, 0.3), floor: 0.25 })).toBe(
      'ok   p50: 0.2 (limit 0.3; the two-node floor: 0.25)',
    );
    expect(checkLine({ ...atLeast('calls/s', 1.8, 1.5), floor: 1.9, floorName: "the uWS floor's" })).toBe(
      "ok   calls/s: 1.8 (limit 1.5; the uWS floor's: 1.9)",
    );
    const [merged] = medianChecks([
      [atLeast('share', 0.72, 0.7)],
      [atLeast('share', 0.6, 0.7)],
      [atLeast('share', 0.75, 0.7)],
    ]);
    expect(checkLine(merged)).toBe('ok   share: 0.72 [0.72, 0.6, 0.75; met in 2 of 3] (limit 0.7)');
    expect(checkLine({ name: 'p99', value: null, limit: 2, ok: null, why: 'direct is too slow' })).toBe(
      'n/a  p99: direct is too slow',
    );
  });
});
