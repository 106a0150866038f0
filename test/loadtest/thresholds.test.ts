import { describe, expect, it } from 'vitest';
import { evaluateThreshold, parseThreshold, ThresholdSyntaxError } from '../../loadtest/lib/thresholds.ts';
import { MetricSet } from '../../loadtest/lib/metrics.ts';
import { parseOptions, UsageError } from '../../loadtest/lib/options.ts';

describe('threshold parsing', () => {
  it('reads the k6 forms', () => {
    expect(parseThreshold('call_duration:p(99)<250')).toMatchObject({
      metric: 'call_duration',
      aggregate: { p: 99 },
      op: '<',
      limit: 250,
    });
    expect(parseThreshold(' errors:count == 0 ')).toMatchObject({
      metric: 'errors',
      aggregate: 'count',
      op: '==',
      limit: 0,
    });
    expect(parseThreshold('accepted:rate>=0.7')).toMatchObject({ aggregate: 'rate', op: '>=', limit: 0.7 });
    expect(parseThreshold('x:p(99.9)<=1e3')).toMatchObject({ aggregate: { p: 99.9 }, op: '<=', limit: 1000 });
    expect(parseThreshold('x:avg!=-2')).toMatchObject({ aggregate: 'avg', op: '!=', limit: -2 });
  });

  it.each([
    ['call_duration<250', 'missing ":"'],
    ['call_duration:p(99)', 'missing comparison'],
    ['call_duration:p99<250', 'unknown aggregate "p99"'],
    ['call_duration:mean<250', 'unknown aggregate "mean"'],
    ['call_duration:p(101)<250', 'percentile "101"'],
    ['call_duration:p()<250', 'percentile ""'],
    ['call_duration:p(99)<abc', '"abc" is not a number'],
    ['call_duration:p(99)<250ms', '"250ms" is not a number'],
    ['call_duration:p(99)=<250', 'use =='],
    ['call duration:p(99)<250', '"call duration" is not a metric name'],
  ])('refuses %s clearly', (text, why) => {
    let err: unknown;
    try {
      parseThreshold(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ThresholdSyntaxError);
    expect((err as Error).message).toContain(`threshold '${text}'`);
    expect((err as Error).message).toContain(why);
    expect((err as Error).message).toContain('e.g. call_duration:p(99)<250');
  });
});

describe('threshold evaluation', () => {
  const metrics = () => {
    const m = new MetricSet();
    const t = m.trend('call_duration');
    for (let i = 1; i <= 1000; i++) t.add(i); // 1..1000 ms
    m.counter('errors').add(3);
    const r = m.rate('ok');
    for (let i = 0; i < 10; i++) r.add(i < 7);
    m.gauge('leaked').set(0);
    m.trend('empty');
    return m.views();
  };
  const check = (t: string) => evaluateThreshold(parseThreshold(t), metrics());

  it('compares trend aggregates from the HDR histogram', () => {
    expect(check('call_duration:p(99)<1000')).toMatchObject({ ok: true });
    expect(check('call_duration:p(99)<900').ok).toBe(false);
    expect(check('call_duration:p(99)<0')).toMatchObject({ ok: false });
    expect(check('call_duration:p(99)<0').actual).toBeCloseTo(990, -1);
    expect(check('call_duration:p(50)>400').ok).toBe(true); // a percentile not precomputed
    expect(check('call_duration:avg<=500.5').ok).toBe(true);
    expect(check('call_duration:avg<500').ok).toBe(false);
    expect(check('call_duration:max>=1000').ok).toBe(true);
    expect(check('call_duration:count==1000').ok).toBe(true);
  });

  it('compares counters, rates and gauges', () => {
    expect(check('errors:count==3').ok).toBe(true);
    expect(check('errors:count==0').ok).toBe(false);
    expect(check('ok:rate>=0.7').ok).toBe(true);
    expect(check('ok:rate>0.7').ok).toBe(false);
    expect(check('leaked:value==0').ok).toBe(true);
  });

  it('fails, saying why, on an unknown metric, an aggregate it lacks, or no data', () => {
    expect(check('nope:count==0')).toMatchObject({ ok: false, error: expect.stringContaining('no metric "nope"') });
    expect(check('nope:count==0').error).toContain('call_duration');
    expect(check('errors:p(99)<1')).toMatchObject({
      ok: false,
      error: expect.stringContaining('counter metric "errors" has no p(99)'),
    });
    expect(check('empty:p(99)<1e9')).toMatchObject({ ok: false });
  });
});

describe('options', () => {
  it('parses the fixed command line', () => {
    const o = parseOptions([
      'timeouts',
      '--duration',
      '12.5',
      '--out',
      'dir',
      '--threshold',
      'a:count==0',
      '--threshold',
      'b:p(99)<1',
      '--target',
      'http://relay.example:8080/',
      '--phones',
      '300',
      '--time-scale',
      '0.01',
    ]);
    expect(o).toMatchObject({ scenario: 'timeouts', durationS: 12.5, out: 'dir', phones: 300, timeScale: 0.01 });
    expect(o.target).toBe('http://relay.example:8080');
    expect(o.thresholds.map((t) => t.source)).toEqual(['a:count==0', 'b:p(99)<1']);
  });
  it.each([
    [['x', '--phones', '1.5'], '--phones must be a positive integer'],
    [['x', '--duration', '0'], '--duration must be a positive number'],
    [['x', '--time-scale', ''], '--time-scale must be a positive number'],
    [['x', '--target', 'ftp://x'], '--target must be http(s)'],
    [['x', '--bogus'], "Unknown option '--bogus'"],
    [['x', 'y'], 'one scenario at a time'],
  ])('refuses %j', (argv, why) => {
    expect(() => parseOptions(argv)).toThrow(UsageError);
    expect(() => parseOptions(argv)).toThrow(why);
  });
});
