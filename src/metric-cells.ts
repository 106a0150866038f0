// Metrics for the per-call path (docs/decisions/0120-metric-cells.md). prom-client hashes a
// label set on every inc/observe, even through a `labels()` child, which builds a string per
// call. Here a label set is bound once to a cell (a plain number, or a histogram's bucket
// array), the hot path only adds to it, and prom-client reads the cells when /metrics is
// scraped. Every bound cell is exported, at zero until it counts: binding a label set at start
// is how a family is present from a node's first scrape (Prometheus' "avoid missing metrics"). A histogram cell may keep exemplars for OpenMetrics
// (docs/decisions/0121-latency-cell-with-exemplars.md).
import { performance } from 'node:perf_hooks';
import client from 'prom-client';

type Labels = Record<string, string>;
// prom-client's typings name the type by an enum its JavaScript does not export; the registry reads the string.
const TYPE = (t: 'counter' | 'gauge' | 'histogram') => t as unknown as client.MetricType;
/** The typings want a collect function in what get() returns; the registry never calls it. */
const collect = () => {};

export interface CellOptions {
  name: string;
  help: string;
  labelNames?: readonly string[];
  registers: client.Registry[];
}

/** One counter series: `inc()` adds to a number, nothing else. */
export class Count {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

function checkLabels(metric: string, names: readonly string[], labels: Labels): void {
  const given = Object.keys(labels);
  if (given.length !== names.length || !names.every((n) => typeof labels[n] === 'string'))
    throw new Error(`${metric}: labels ${JSON.stringify(given)} do not match ${JSON.stringify(names)}`);
}

function sameLabels(a: Labels, b: Labels): boolean {
  for (const k in a) if (a[k] !== b[k]) return false;
  return true;
}

/** A counter whose series are Count cells. */
export class CellCounter extends client.Counter<string> {
  private readonly cells: Array<{ labels: Labels; cell: Count }> = [];

  constructor(private readonly opts: CellOptions) {
    super({ name: opts.name, help: opts.help, labelNames: opts.labelNames ?? [], registers: opts.registers });
    if ((opts.labelNames ?? []).length === 0) this.cells.push({ labels: {}, cell: new Count() });
  }

  /** The cell of one label set; bind it once (module load or first use), never per call. */
  cell(labels: Labels = {}): Count {
    checkLabels(this.opts.name, this.opts.labelNames ?? [], labels);
    const found = this.cells.find((c) => sameLabels(c.labels, labels));
    if (found) return found.cell;
    const cell = new Count();
    this.cells.push({ labels: { ...labels }, cell });
    return cell;
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- prom-client's get() is async
  override async get(): Promise<client.MetricObjectWithValues<client.MetricValue<string>>> {
    return {
      name: this.opts.name,
      help: this.opts.help,
      type: TYPE('counter'),
      aggregator: 'sum',
      collect,
      values: this.cells.map((c) => ({ labels: c.labels, value: c.cell.value })),
    };
  }
}

/** The latest observation of a bucket with its labels (a trace id), as OpenMetrics exports it. */
export interface BucketExemplar {
  labelSet: Labels;
  value: number;
  /** Seconds since the epoch, as prom-client stamps its own. */
  timestamp: number;
}

/** One histogram series: `observe()` counts into a preallocated bucket array. */
export class Timing {
  /** Per bucket (not cumulative); the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  /** Per bucket, once an observation came with an exemplar (tracing on). */
  exemplars?: Array<BucketExemplar | undefined>;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** Counts `seconds`; returns its bucket's index. */
  observe(seconds: number): number {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && seconds > b[i]) i++;
    this.counts[i]++;
    this.sum += seconds;
    this.count++;
    return i;
  }

  /** Counts `seconds` `times` times (messages one reply answered together). */
  observeTimes(seconds: number, times: number): void {
    const i = this.observe(seconds);
    this.counts[i] += times - 1;
    this.sum += seconds * (times - 1);
    this.count += times - 1;
  }

  /** Counts `seconds` and keeps it, with `labelSet`, as its bucket's exemplar. */
  observeWithExemplar(seconds: number, labelSet: Labels): void {
    const i = this.observe(seconds);
    (this.exemplars ??= new Array<BucketExemplar | undefined>(this.counts.length))[i] = {
      labelSet,
      value: seconds,
      timestamp: Date.now() / 1000,
    };
  }

  /** Seconds since `startedMs` (a performance.now() reading). */
  since(startedMs: number): void {
    this.observe((performance.now() - startedMs) / 1000);
  }
}

/** A histogram whose series are Timing cells. */
export class CellHistogram extends client.Histogram<string> {
  private readonly cells: Array<{ labels: Labels; cell: Timing }> = [];
  private readonly bounds: readonly number[];

  constructor(private readonly opts: CellOptions & { buckets: readonly number[] }) {
    super({
      name: opts.name,
      help: opts.help,
      labelNames: opts.labelNames ?? [],
      buckets: [...opts.buckets],
      registers: opts.registers,
    });
    this.bounds = [...opts.buckets];
    if ((opts.labelNames ?? []).length === 0) this.cells.push({ labels: {}, cell: new Timing(this.bounds) });
  }

  cell(labels: Labels = {}): Timing {
    checkLabels(this.opts.name, this.opts.labelNames ?? [], labels);
    const found = this.cells.find((c) => sameLabels(c.labels, labels));
    if (found) return found.cell;
    const cell = new Timing(this.bounds);
    this.cells.push({ labels: { ...labels }, cell });
    return cell;
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- prom-client's get() is async
  override async get(): Promise<client.MetricObjectWithValues<client.MetricValueWithName<string>>> {
    const values: client.MetricValueWithName<string>[] = [];
    for (const { labels, cell } of this.cells) {
      let acc = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        acc += cell.counts[i];
        const le = i < this.bounds.length ? this.bounds[i] : '+Inf';
        const exemplar = cell.exemplars?.[i];
        values.push({
          labels: { ...labels, le },
          value: acc,
          metricName: `${this.opts.name}_bucket`,
          // Rendered only in OpenMetrics (prom-client's text format and src/observability/openmetrics.ts).
          ...(exemplar && { exemplar }),
        });
      }
      values.push({ labels, value: cell.sum, metricName: `${this.opts.name}_sum` });
      values.push({ labels, value: cell.count, metricName: `${this.opts.name}_count` });
    }
    return { name: this.opts.name, help: this.opts.help, type: TYPE('histogram'), aggregator: 'sum', collect, values };
  }

  /** prom-client's registry prefers this to get() for the text format (its Histogram has one). */
  getForPromString(): ReturnType<CellHistogram['get']> {
    return this.get();
  }
}

/**
 * A gauge read when /metrics is scraped (nothing on the hot path). `read` returns the series
 * (labels and value); an empty list exports none — a node without Redis has no Redis health.
 */
export class ReadGauge extends client.Gauge<string> {
  constructor(
    private readonly opts: CellOptions,
    private readonly read: () => Array<[Labels, number]>,
  ) {
    super({ name: opts.name, help: opts.help, labelNames: opts.labelNames ?? [], registers: opts.registers });
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- prom-client's get() is async
  override async get(): Promise<client.MetricObjectWithValues<client.MetricValue<string>>> {
    return {
      name: this.opts.name,
      help: this.opts.help,
      type: TYPE('gauge'),
      aggregator: 'sum',
      collect,
      values: this.read().map(([labels, value]) => ({ labels, value })),
    };
  }
}
