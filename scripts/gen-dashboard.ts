// Regenerates the Grafana dashboard JSON (deploy/grafana/phonebridge.json and the chart's copy in
// helm/phonebridge/dashboards/) from deploy/grafana/dashboard.ts. Run: npm run dashboard
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DASHBOARD_FILES, renderDashboardJson } from '../deploy/grafana/dashboard.ts';

const json = renderDashboardJson();
for (const file of DASHBOARD_FILES) {
  const path = fileURLToPath(new URL(`../${file}`, import.meta.url));
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, json);
  console.log(`wrote ${file}`);
}
