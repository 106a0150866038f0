// OpenMetrics text from a real prom-client registry: families, counter naming, exemplars, escaping.
import { describe, expect, it } from 'vitest';
import client from 'prom-client';
import { renderOpenMetrics, wantsOpenMetrics } from './openmetrics.ts';

describe('renderOpenMetrics', () => {
  it('names counter families without _total and their samples with it, keeps exemplars, ends with # EOF', async () => {
    const registry = new client.Registry();
    const counter = new client.Counter({
      name: 'x_requests_total',
      help: 'requests\nby "kind"',
      labelNames: ['kind'],
      registers: [registry],
    });
    counter.inc({ kind: 'a"b\\c' }, 2);
    const h = new client.Histogram({
      name: 'x_seconds',
      help: 'latency',
      labelNames: ['m'],
      buckets: [0.1, 1],
      enableExemplars: true,
      registers: [],
    });
    registry.registerMetric(h);
    const exemplarLabels: Record<string, string> = { trace_id: '0af7651916cd43dd8448eb211c80319c' };
    h.observe({ labels: { m: 'tools/call' }, value: 0.05, exemplarLabels });
    new client.Gauge({ name: 'x_up', help: 'up', registers: [registry] }).set(1);

    const text = await renderOpenMetrics(registry);
    const lines = text.trimEnd().split('\n');
    expect(lines.at(-1)).toBe('# EOF');
    expect(text.endsWith('\n')).toBe(true);
    expect(lines).toContain('# HELP x_requests requests\\nby "kind"');
    expect(lines).toContain('# TYPE x_requests counter');
    expect(lines).toContain('x_requests_total{kind="a\\"b\\\\c"} 2');
    expect(text).not.toContain('x_requests_total_total');
    expect(lines).toContain('# TYPE x_seconds histogram');
    const bucket = lines.find((l) => l.startsWith('x_seconds_bucket{le="0.1"'))!;
    expect(bucket).toMatch(
      /^x_seconds_bucket\{le="0\.1",m="tools\/call"\} 1 # \{trace_id="0af7651916cd43dd8448eb211c80319c"\} 0\.05 \d+(\.\d+)?$/,
    );
    expect(lines).toContain('x_seconds_bucket{le="+Inf",m="tools/call"} 1');
    expect(lines).toContain('x_seconds_count{m="tools/call"} 1');
    expect(lines).toContain('x_up 1');
    // The shared metric objects keep their names: Prometheus text is unchanged afterwards.
    expect(await registry.metrics()).toContain('# TYPE x_requests_total counter');
  });

  it('is chosen only when the scraper asks for it', () => {
    expect(wantsOpenMetrics('application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5')).toBe(true);
    expect(wantsOpenMetrics('text/plain;version=0.0.4')).toBe(false);
    expect(wantsOpenMetrics('')).toBe(false);
  });
});
