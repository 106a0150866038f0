// The cells of src/metric-cells.ts as Prometheus reads them: prom-client's own registry renders
// them, so the text is what /metrics serves.
import { describe, expect, it } from 'vitest';
import client from 'prom-client';
import { CellCounter, CellHistogram, ReadGauge } from './metric-cells.ts';
import { LATENCY_BUCKETS } from './metrics.ts';

describe('metric cells', () => {
  it('exports every bound counter series from the start, at zero until it counts', async () => {
    const registry = new client.Registry();
    const c = new CellCounter({ name: 't_total', help: 'h', labelNames: ['side'], registers: [registry] });
    const u = new CellCounter({ name: 'u_total', help: 'h', registers: [registry] });
    const phone = c.cell({ side: 'phone' });
    c.cell({ side: 'client' });
    expect(c.cell({ side: 'phone' })).toBe(phone);
    let text = await registry.metrics();
    expect(text).toContain('t_total{side="phone"} 0');
    expect(text).toContain('t_total{side="client"} 0');
    expect(text).not.toContain('side="other"');
    expect(text).toContain('u_total 0');
    phone.inc();
    phone.inc(41);
    u.cell().inc();
    text = await registry.metrics();
    expect(text).toContain('t_total{side="phone"} 42');
    expect(text).toContain('t_total{side="client"} 0');
    expect(text).toContain('u_total 1');
    expect(() => c.cell({ other: 'x' })).toThrow(/do not match/);
  });

  it("keeps a bucket's latest exemplar for OpenMetrics, and Prometheus text shows none", async () => {
    const registry = new client.Registry();
    const h = new CellHistogram({
      name: 'ex_seconds',
      help: 'h',
      labelNames: ['method'],
      buckets: [0.001, 1],
      registers: [registry],
    });
    const cell = h.cell({ method: 'tools/call' });
    cell.observe(0.0002);
    cell.observeWithExemplar(0.5, { trace_id: 'a'.repeat(32) });
    cell.observeWithExemplar(0.7, { trace_id: 'b'.repeat(32) });
    const values = (await h.get()).values as Array<{
      labels: Record<string, unknown>;
      value: number;
      exemplar?: { labelSet: Record<string, string>; value: number; timestamp: number };
    }>;
    const byLe = (le: unknown) => values.find((v) => v.labels.le === le)!;
    expect(byLe(0.001).exemplar).toBeUndefined();
    expect(byLe(1).value).toBe(3);
    expect(byLe(1).exemplar).toMatchObject({ labelSet: { trace_id: 'b'.repeat(32) }, value: 0.7 });
    expect(Math.abs(byLe(1).exemplar!.timestamp - Date.now() / 1000)).toBeLessThan(60);
    expect(byLe('+Inf').exemplar).toBeUndefined();
    const text = await registry.metrics();
    expect(text).toContain('ex_seconds_bucket{method="tools/call",le="1"} 3');
    expect(text).not.toContain('trace_id');
  });

  it('renders a histogram with cumulative buckets, sum and count', async () => {
    const registry = new client.Registry();
    const h = new CellHistogram({ name: 'lat_seconds', help: 'h', buckets: [0.001, 1], registers: [registry] });
    const cell = h.cell();
    cell.observe(0.0005);
    cell.observe(0.001); // on the bound: counted in it (le is "less or equal")
    cell.observe(0.5);
    cell.observe(700);
    const text = await registry.metrics();
    expect(text).toContain('lat_seconds_bucket{le="0.001"} 2');
    expect(text).toContain('lat_seconds_bucket{le="1"} 3');
    expect(text).toContain('lat_seconds_bucket{le="+Inf"} 4');
    expect(text).toContain('lat_seconds_sum 700.5015');
    expect(text).toContain('lat_seconds_count 4');
    expect(text).toContain('# TYPE lat_seconds histogram');
  });

  it('counts one reading for several observations at once (a batch one reply confirmed)', async () => {
    const registry = new client.Registry();
    const h = new CellHistogram({ name: 'batch_seconds', help: 'h', buckets: [0.001, 1], registers: [registry] });
    const cell = h.cell();
    cell.observeTimes(0.5, 3);
    cell.observeTimes(0.0005, 1);
    const text = await registry.metrics();
    expect(text).toContain('batch_seconds_bucket{le="0.001"} 1');
    expect(text).toContain('batch_seconds_bucket{le="1"} 4');
    expect(text).toContain('batch_seconds_sum 1.5005');
    expect(text).toContain('batch_seconds_count 4');
  });

  it('reads a gauge at scrape time, and exports none when there is nothing to report', async () => {
    const registry = new client.Registry();
    let up: number | undefined;
    new ReadGauge({ name: 'up_now', help: 'h', registers: [registry] }, () => (up === undefined ? [] : [[{}, up]]));
    expect(await registry.metrics()).not.toMatch(/^up_now /m);
    up = 0;
    expect(await registry.metrics()).toMatch(/^up_now 0$/m);
    up = 1;
    expect(await registry.metrics()).toMatch(/^up_now 1$/m);
  });

  it('spans sub-millisecond to 615 s in every latency histogram', () => {
    expect(LATENCY_BUCKETS[0]).toBeLessThan(0.001);
    expect(LATENCY_BUCKETS.at(-1)).toBe(615);
    expect([...LATENCY_BUCKETS].sort((a, b) => a - b)).toEqual([...LATENCY_BUCKETS]);
  });
});
