// k6-style thresholds: `metric:aggregate op number`, e.g. `call_duration:p(99)<250`,
// `errors:count==0`, `accepted:rate>=0.7`. Parsing is pure and strict (a typo must not turn
// into a threshold that always passes); evaluation reads a snapshot of the run's metrics.

export type Aggregate = 'avg' | 'min' | 'max' | 'med' | 'count' | 'rate' | 'value' | { p: number };
export type Operator = '<' | '<=' | '>' | '>=' | '==' | '!=';

export interface Threshold {
  /** The text as given, for reports. */
  source: string;
  metric: string;
  aggregate: Aggregate;
  op: Operator;
  limit: number;
}

export class ThresholdSyntaxError extends Error {
  constructor(source: string, why: string) {
    super(`threshold '${source}': ${why} (expected METRIC:AGGREGATE OP NUMBER, e.g. call_duration:p(99)<250)`);
    this.name = 'ThresholdSyntaxError';
  }
}

const SHAPE = /^\s*([^:]*?)\s*:\s*(.*?)\s*(<=|>=|==|!=|<|>|=)\s*(.*?)\s*$/;
const METRIC = /^[A-Za-z_][A-Za-z0-9_.]*$/;
const NAMED = new Set(['avg', 'min', 'max', 'med', 'count', 'rate', 'value']);

export function aggregateName(a: Aggregate): string {
  return typeof a === 'string' ? a : `p(${a.p})`;
}

function parseAggregate(source: string, text: string): Aggregate {
  const p = /^p\(\s*([^)]*?)\s*\)$/.exec(text);
  if (p) {
    const n = Number(p[1]);
    if (p[1] === '' || !Number.isFinite(n) || n < 0 || n > 100)
      throw new ThresholdSyntaxError(source, `percentile "${p[1]}" must be a number from 0 to 100`);
    return { p: n };
  }
  if (!NAMED.has(text))
    throw new ThresholdSyntaxError(
      source,
      `unknown aggregate "${text}" (use avg, min, max, med, count, rate, value or p(N))`,
    );
  return text as Aggregate;
}

export function parseThreshold(source: string): Threshold {
  const m = SHAPE.exec(source);
  if (!m) {
    if (!source.includes(':')) throw new ThresholdSyntaxError(source, 'missing ":" between metric and aggregate');
    if (!/(<|>|==|!=)/.test(source))
      throw new ThresholdSyntaxError(source, 'missing comparison (<, <=, >, >=, ==, !=)');
    throw new ThresholdSyntaxError(source, 'not understood');
  }
  const [, metric, agg, op, num] = m;
  if (!METRIC.test(metric)) throw new ThresholdSyntaxError(source, `"${metric}" is not a metric name`);
  if (op === '=') throw new ThresholdSyntaxError(source, '"=" is not a comparison; use ==');
  const aggregate = parseAggregate(source, agg);
  const limit = Number(num);
  if (!/^-?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i.test(num) || !Number.isFinite(limit))
    throw new ThresholdSyntaxError(source, `"${num}" is not a number`);
  return { source: source.trim(), metric, aggregate, op: op as Operator, limit };
}

/** What a metric offers to thresholds: aggregate name ("p(99)" included) → value. */
export interface MetricView {
  type: string;
  values: Record<string, number>;
  /** Percentile of a trend, for p(N) that is not among `values`. */
  percentile?(p: number): number;
}

export interface Verdict {
  threshold: string;
  ok: boolean;
  /** The measured value, when there was one. */
  actual?: number;
  /** Why the threshold could not be evaluated (unknown metric, aggregate not offered). */
  error?: string;
}

export function compare(actual: number, op: Operator, limit: number): boolean {
  switch (op) {
    case '<':
      return actual < limit;
    case '<=':
      return actual <= limit;
    case '>':
      return actual > limit;
    case '>=':
      return actual >= limit;
    case '==':
      return actual === limit;
    case '!=':
      return actual !== limit;
  }
}

export function evaluateThreshold(t: Threshold, metrics: Record<string, MetricView>): Verdict {
  const m = metrics[t.metric];
  if (!m)
    return {
      threshold: t.source,
      ok: false,
      error: `no metric "${t.metric}" in this scenario (known: ${Object.keys(metrics).sort().join(', ') || 'none'})`,
    };
  const name = aggregateName(t.aggregate);
  let actual: number | undefined = m.values[name];
  if (actual === undefined && typeof t.aggregate === 'object' && m.percentile) actual = m.percentile(t.aggregate.p);
  if (actual === undefined)
    return {
      threshold: t.source,
      ok: false,
      error: `${m.type} metric "${t.metric}" has no ${name} (it has ${Object.keys(m.values).join(', ')}${m.percentile ? ', p(N)' : ''})`,
    };
  // NaN (a trend with no samples) fails every comparison: no data is not a pass.
  return { threshold: t.source, ok: Number.isFinite(actual) && compare(actual, t.op, t.limit), actual };
}
