// Reading a Grafana dashboard JSON: its PromQL queries and variable queries, and the series names
// a query uses. Shared by the static dashboard test and the real-Prometheus test.

export interface DashboardQuery {
  panel: string;
  expr: string;
}

interface PanelJson {
  title?: string;
  type?: string;
  targets?: Array<{ expr?: string }>;
  panels?: PanelJson[];
}

/** Every target's expr, rows' nested (collapsed) panels included. */
export function dashboardQueries(dashboard: { panels?: PanelJson[] }): DashboardQuery[] {
  const out: DashboardQuery[] = [];
  const walk = (panels: PanelJson[] = []) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ panel: p.title ?? '?', expr: t.expr });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  return out;
}

/** Query variables as `label_values(<selector>, <label>)`. */
export function dashboardVariableQueries(dashboard: {
  templating?: { list?: Array<{ name: string; type: string; query?: unknown }> };
}): Array<{ name: string; query: string; selector: string; label: string }> {
  const out = [];
  for (const v of dashboard.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const query = String(v.query);
    const m = /^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$/.exec(query);
    if (!m) throw new Error(`variable ${v.name}: not a label_values(selector, label) query: ${query}`);
    out.push({ name: v.name, query, selector: m[1], label: m[2] });
  }
  return out;
}

const PROMQL_WORDS = new Set([
  'sum',
  'max',
  'min',
  'avg',
  'count',
  'by',
  'without',
  'rate',
  'irate',
  'increase',
  'histogram_quantile',
  'label_values',
  'and',
  'or',
  'unless',
  'offset',
  'bool',
]);

/** Metric names in a PromQL expression: identifiers not inside a `{…}` matcher or `[…]` range. */
export function seriesNames(expr: string): string[] {
  const bare = expr
    .replace(/\{[^}]*\}/g, '{}')
    .replace(/\[[^\]]*\]/g, '[]')
    .replace(/"[^"]*"/g, '""')
    .replace(/\b(by|without)\s*\([^)]*\)/g, '');
  const names = new Set<string>();
  for (const m of bare.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g)) {
    const name = m[1];
    if (!PROMQL_WORDS.has(name) && !/^\d/.test(name)) names.add(name);
  }
  return [...names];
}

/**
 * The expression as Grafana sends it with every node selected on job `job`:
 * `$__rate_interval` becomes `rateInterval` (Grafana computes it from the scrape interval).
 */
export function substituteVariables(expr: string, job: string, rateInterval: string): string {
  return expr.replaceAll('$__rate_interval', rateInterval).replaceAll('$job', job).replaceAll('$instance', '.+');
}
