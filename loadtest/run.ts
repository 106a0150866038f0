// `npm run loadtest [name…]`: the benchmarks and long load scenarios that stay out of
// npm test. Each is bounded in count and time and talks to 127.0.0.1 only.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const SCENARIOS: Record<string, string> = {
  'id-restore': 'loadtest/id-restore.bench.ts',
  'cache-latency': 'loadtest/cache-latency.ts',
  'cluster-latency': 'loadtest/cluster-latency.ts',
  fleet: 'loadtest/fleet-bench.ts',
  churn: 'loadtest/churn.ts',
  'relay-overhead': 'loadtest/relay-overhead.ts',
};

const root = fileURLToPath(new URL('..', import.meta.url));
const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const names = wanted.length ? wanted : Object.keys(SCENARIOS);
let failed = 0;
for (const name of names) {
  const file = SCENARIOS[name];
  if (!file || !existsSync(`${root}/${file}`)) {
    console.error(`unknown scenario "${name}"; known: ${Object.keys(SCENARIOS).join(', ')}`);
    failed++;
    continue;
  }
  console.log(`\n=== ${name} (${file})`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', file], {
    cwd: root,
    stdio: 'inherit',
    timeout: 30 * 60_000,
  });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
