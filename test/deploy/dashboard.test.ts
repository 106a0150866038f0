// The Grafana dashboard (deploy/grafana/dashboard.ts): the committed JSON files are exactly what
// the code emits, and every query names only series the relay really registers (src/metrics.ts)
// or that Prometheus records itself. test/deploy/prometheus.test.ts runs the queries for real.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  DASHBOARD_COMMAND,
  DASHBOARD_FILES,
  buildDashboard,
  renderDashboardJson,
} from '../../deploy/grafana/dashboard.ts';
import { registry } from '../../src/metrics.ts';
// The fleet feature's series (registered with its module, as in a running node).
import '../../src/fleet/metrics.ts';
import { dashboardQueries, dashboardVariableQueries, seriesNames } from './dashboard-queries.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Series Prometheus adds to every target; the dashboard may use them. */
const PROMETHEUS_SERIES = new Set(['up', 'scrape_duration_seconds']);

async function exportedSeries(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const m of (await registry.metrics()).matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
  }
  return names;
}

describe('Grafana dashboard', () => {
  it(`is committed exactly as the code emits it (else run \`${DASHBOARD_COMMAND}\`)`, () => {
    const json = renderDashboardJson();
    expect(DASHBOARD_FILES).toContain('helm/phonebridge/dashboards/phonebridge.json');
    for (const file of DASHBOARD_FILES) {
      expect(readFileSync(join(ROOT, file), 'utf8'), `${file} is stale: run ${DASHBOARD_COMMAND}`).toBe(json);
    }
  });

  it('has the operator rows, unique panel ids, and a query on every panel', () => {
    const d = buildDashboard();
    const panels = d.panels ?? [];
    const rows = panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows).toEqual([
      'Fleet overview',
      'Per node',
      'Errors and refusals',
      'Pairing and auth',
      'Store, Redis and process health',
      'Fleets: allocations and enrollment',
    ]);
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels.filter((x) => x.type !== 'row')) {
      expect((p as { targets?: unknown[] }).targets?.length, `panel ${p.title}`).toBeGreaterThan(0);
      expect((p as { description?: string }).description, `panel ${p.title} explains itself`).toBeTruthy();
    }
    expect(dashboardQueries(JSON.parse(renderDashboardJson())).length).toBeGreaterThanOrEqual(20);
  });

  it('queries only series the relay registers, filtered by the job and node variables', async () => {
    const exported = await exportedSeries();
    expect(exported).toContain('phonebridge_mcp_requests_total');
    const d = JSON.parse(renderDashboardJson());
    for (const { panel, expr } of dashboardQueries(d)) {
      const names = seriesNames(expr);
      expect(names.length, `${panel}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) {
        if (PROMETHEUS_SERIES.has(name)) continue;
        expect(exported, `${panel}: ${name}`).toContain(name);
      }
      expect(expr, panel).toContain('job=~"$job", instance=~"$instance"');
    }
    for (const v of dashboardVariableQueries(d)) {
      for (const name of seriesNames(v.selector)) expect(exported, `variable ${v.name}`).toContain(name);
    }
  });
});
