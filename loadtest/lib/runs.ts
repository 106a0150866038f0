// Verdicts over several whole runs of a scenario. Between runs the machine's speed, the
// collector's state and each process's code layout move a ratio by more than most changes
// do (docs/BENCHMARKS.md, "At the same rate, layer by layer": relay ÷ uWS floor read
// 1.21–1.54 over six runs of one tree), so a target decided by one run is a coin toss near
// its limit. Each run is whole (its
// own processes, warm-up and alternating rounds); a check's verdict is read on the median of
// the runs' figures.

/** One check of a run's report.json (`ok: null`: not applicable in that run, with `why`). */
export interface RunCheck {
  name: string;
  /** Printed to two places; `exact`, where the run wrote it, is what decided. */
  value: number | null;
  exact?: number;
  limit: number;
  ok: boolean | null;
  /** The value must be at most the limit (else at least). Absent on a count that fails by being there ("no errors"). */
  atMost?: boolean;
  /** The same figure for a floor, where there is one: the two-node floor unless `floorName` says. */
  floor?: number;
  floorName?: string;
  why?: string;
}

export interface MedianCheck extends RunCheck {
  /** Each run's value, in run order; null where the run did not apply it or lacked it. */
  values: Array<number | null>;
  /** Runs in which the check was met, of those that decided it. */
  met: number;
  decided: number;
}

export function medianOf(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Whether `value` meets `limit`: at most it, or at least it. */
export const meets = (value: number, limit: number, atMost: boolean): boolean =>
  atMost ? value <= limit : value >= limit;

/**
 * The runs' checks merged by name, in the order they first appear: the median value decides,
 * not its two-place print (as a run decides on its own value, not on the printed one). A check
 * without a direction (a run's errors) fails the whole if any run has it; a check no run
 * decided stays not applicable.
 */
export function medianChecks(runs: RunCheck[][]): MedianCheck[] {
  const names: string[] = [];
  for (const run of runs) for (const c of run) if (!names.includes(c.name)) names.push(c.name);
  return names.map((name) => {
    const each = runs.map((run) => run.find((c) => c.name === name));
    const decided = each.filter((c): c is RunCheck => c !== undefined && c.ok !== null && c.value !== null);
    const values = each.map((c) => (c && c.ok !== null ? c.value : null));
    const met = decided.filter((c) => c.ok).length;
    if (decided.length === 0)
      return { ...each.find((c) => c !== undefined)!, value: null, ok: null, values, met, decided: 0 };
    const ref = decided[0];
    // To a millionth: the middle two's mean of 0.2 and 0.4 is 0.30000000000000004, not above 0.3.
    // Each run's own unrounded figure (a run that read 0.6996 printed 0.7 and missed 0.7).
    const median = Math.round(medianOf(decided.map((c) => c.exact ?? c.value!)) * 1e6) / 1e6;
    const floors = decided.flatMap((c) => (c.floor === undefined ? [] : [c.floor]));
    return {
      ...ref,
      value: round2(median),
      exact: median,
      ok: ref.atMost === undefined ? met === decided.length : meets(median, ref.limit, ref.atMost),
      floor: floors.length ? round2(medianOf(floors)) : undefined,
      values,
      met,
      decided: decided.length,
    };
  });
}

/** A check as the scenario prints it; a merged one with each run's value and how many met it. */
export function checkLine(c: RunCheck | MedianCheck): string {
  if (c.ok === null) return `n/a  ${c.name}: ${c.why}`;
  const runs = 'values' in c ? ` [${c.values.map((v) => v ?? '–').join(', ')}; met in ${c.met} of ${c.decided}]` : '';
  const floor = c.floor === undefined ? '' : `; ${c.floorName ?? 'the two-node floor'}: ${c.floor}`;
  return `${c.ok ? 'ok  ' : 'MISS'} ${c.name}: ${c.value}${runs} (limit ${c.limit}${floor})`;
}
