// /metrics in OpenMetrics text (what Prometheus asks for first) while tracing is on, so the
// latency histogram's exemplars (trace ids) reach it. Rendered here from the registry's values
// rather than by prom-client's own OpenMetrics mode, which renames the shared counter objects
// while it renders (a concurrent Prometheus-text scrape would then see the wrong names).
import type { Registry } from 'prom-client';

export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

/** True when the scraper's Accept header asks for OpenMetrics text. */
export function wantsOpenMetrics(accept: string): boolean {
  return accept.includes('application/openmetrics-text');
}

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function number(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function labels(set: Record<string, string | number> | undefined): string {
  if (!set) return '';
  const parts: string[] = [];
  for (const k in set) parts.push(`${k}="${escapeLabel(String(set[k]))}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

interface Value {
  value: number;
  metricName?: string;
  labels?: Record<string, string | number>;
  exemplar?: { labelSet: Record<string, string>; value: number; timestamp: number } | null;
}

/**
 * The registry in OpenMetrics 1.0 text. A counter family is named without its `_total`, its
 * samples with it (so `phonebridge_mcp_requests_total` stays the series Prometheus stores).
 */
export async function renderOpenMetrics(registry: Registry): Promise<string> {
  const families = (await registry.getMetricsAsJSON()) as unknown as Array<{
    name: string;
    help: string;
    type: string;
    values: Value[];
  }>;
  const out: string[] = [];
  for (const f of families) {
    const counter = f.type === 'counter';
    const family = counter ? f.name.replace(/_total$/, '') : f.name;
    out.push(`# HELP ${family} ${escapeHelp(f.help)}`, `# TYPE ${family} ${f.type}`);
    for (const v of f.values) {
      const name = v.metricName ?? (counter ? `${family}_total` : f.name);
      let line = `${name}${labels(v.labels)} ${number(v.value)}`;
      if (v.exemplar) line += ` # ${labels(v.exemplar.labelSet)} ${number(v.exemplar.value)} ${v.exemplar.timestamp}`;
      out.push(line);
    }
  }
  out.push('# EOF');
  return `${out.join('\n')}\n`;
}
