// The run's metrics, k6's four kinds: Trend (an HDR histogram of durations, ms), Counter
// (a count and its rate per second), Rate (the share of true samples), Gauge (last, min, max).
// Trends also keep one small histogram per second, for latency-over-time charts.
import * as hdr from 'hdr-histogram-js';
import type { MetricView } from './thresholds.ts';

const US_PER_MS = 1000;
const HIGHEST_US = 3_600_000_000; // one hour

function histogram(): hdr.Histogram {
  return hdr.build({
    bitBucketSize: 'packed',
    lowestDiscernibleValue: 1,
    highestTrackableValue: HIGHEST_US,
    numberOfSignificantValueDigits: 3,
    useWebAssembly: false,
  });
}

export interface TrendPoint {
  /** Seconds since the run started (start of the one-second window). */
  t: number;
  count: number;
  p50: number;
  p99: number;
  max: number;
}

export class Trend {
  readonly type = 'trend';
  private readonly all = histogram();
  private readonly perSecond = new Map<number, hdr.Histogram>();
  private sum = 0;
  constructor(
    readonly name: string,
    private readonly startedAt: number,
  ) {}

  /** A duration in milliseconds. */
  add(ms: number, at = performance.now()): void {
    const us = Math.min(HIGHEST_US, Math.max(1, Math.round(ms * US_PER_MS)));
    this.all.recordValue(us);
    this.sum += ms;
    const second = Math.max(0, Math.floor((at - this.startedAt) / 1000));
    let h = this.perSecond.get(second);
    if (!h) this.perSecond.set(second, (h = histogram()));
    h.recordValue(us);
  }

  get count(): number {
    return this.all.totalCount;
  }

  percentile(p: number): number {
    return this.count ? this.all.getValueAtPercentile(p) / US_PER_MS : NaN;
  }

  series(): TrendPoint[] {
    return [...this.perSecond.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([t, h]) => ({
        t,
        count: h.totalCount,
        p50: h.getValueAtPercentile(50) / US_PER_MS,
        p99: h.getValueAtPercentile(99) / US_PER_MS,
        max: h.maxValue / US_PER_MS,
      }));
  }

  values(): Record<string, number> {
    const n = this.count;
    return {
      count: n,
      avg: n ? this.sum / n : NaN,
      min: n ? this.all.minNonZeroValue / US_PER_MS : NaN,
      med: this.percentile(50),
      'p(90)': this.percentile(90),
      'p(95)': this.percentile(95),
      'p(99)': this.percentile(99),
      'p(99.9)': this.percentile(99.9),
      max: n ? this.all.maxValue / US_PER_MS : NaN,
    };
  }

  /** Percentile curve for charts: (percentile, ms). */
  curve(): Array<[number, number]> {
    const ps = [0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100];
    return this.count ? ps.map((p) => [p, this.percentile(p)]) : [];
  }
}

export class Counter {
  readonly type = 'counter';
  count = 0;
  constructor(
    readonly name: string,
    private readonly elapsedS: () => number,
  ) {}
  add(n = 1): void {
    this.count += n;
  }
  values(): Record<string, number> {
    const s = this.elapsedS();
    return { count: this.count, rate: s > 0 ? this.count / s : 0 };
  }
}

export class Rate {
  readonly type = 'rate';
  trues = 0;
  total = 0;
  constructor(readonly name: string) {}
  add(ok: boolean): void {
    this.total++;
    if (ok) this.trues++;
  }
  values(): Record<string, number> {
    return { rate: this.total ? this.trues / this.total : NaN, count: this.total, passes: this.trues };
  }
}

export class Gauge {
  readonly type = 'gauge';
  value = NaN;
  min = NaN;
  max = NaN;
  constructor(readonly name: string) {}
  set(v: number): void {
    this.value = v;
    this.min = Number.isNaN(this.min) ? v : Math.min(this.min, v);
    this.max = Number.isNaN(this.max) ? v : Math.max(this.max, v);
  }
  values(): Record<string, number> {
    return { value: this.value, min: this.min, max: this.max };
  }
}

export type Metric = Trend | Counter | Rate | Gauge;

export class MetricSet {
  readonly startedAt = performance.now();
  private readonly byName = new Map<string, Metric>();

  elapsedS = (): number => (performance.now() - this.startedAt) / 1000;

  private get<M extends Metric>(name: string, make: () => M, type: string): M {
    const m = this.byName.get(name);
    if (m) {
      if (m.type !== type) throw new Error(`metric ${name} is a ${m.type}, not a ${type}`);
      return m as M;
    }
    const made = make();
    this.byName.set(name, made);
    return made;
  }
  trend(name: string): Trend {
    return this.get(name, () => new Trend(name, this.startedAt), 'trend');
  }
  counter(name: string): Counter {
    return this.get(name, () => new Counter(name, this.elapsedS), 'counter');
  }
  rate(name: string): Rate {
    return this.get(name, () => new Rate(name), 'rate');
  }
  gauge(name: string): Gauge {
    return this.get(name, () => new Gauge(name), 'gauge');
  }

  all(): Metric[] {
    return [...this.byName.values()];
  }

  /** What thresholds evaluate against. */
  views(): Record<string, MetricView> {
    const out: Record<string, MetricView> = {};
    for (const m of this.byName.values())
      out[m.name] = {
        type: m.type,
        values: m.values(),
        percentile: m instanceof Trend ? (p) => m.percentile(p) : undefined,
      };
    return out;
  }
}
