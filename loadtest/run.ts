// `npm run loadtest -- <scenario> [--duration S] [--out DIR] [--threshold 'EXPR']… [--target URL]
//                                 [--phones N] [--time-scale F] [--redis-url URL]…`
// A scenario module exports `scenario` (loadtest/lib/scenario.ts) and gets the framework:
// thresholds, progress, report.json/report.md/SVG charts, exit 99 when a threshold fails.
// A module without that export is a stand-alone script, run as a child with the arguments.
// Every scenario is bounded in count and time and talks to 127.0.0.1 (or --target).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseOptions, UsageError } from './lib/options.ts';
import { runScenario } from './lib/runner.ts';
import type { Scenario } from './lib/scenario.ts';
import { ThresholdSyntaxError } from './lib/thresholds.ts';

/** The registry: one line per scenario. */
const SCENARIOS: Record<string, string> = {
  framing: 'loadtest/framing.ts',
  timeouts: 'loadtest/timeouts.ts',
  capacity: 'loadtest/capacity.ts',
  throughput: 'loadtest/throughput.ts',
  storm: 'loadtest/storm.ts',
  soak: 'loadtest/soak.ts',
  'relay-overhead': 'loadtest/relay-overhead-scenario.ts',
  churn: 'loadtest/churn.ts',
  'id-restore': 'loadtest/id-restore.bench.ts',
  'cache-latency': 'loadtest/cache-latency.ts',
  'cluster-latency': 'loadtest/cluster-latency.ts',
  fleet: 'loadtest/fleet-pool.ts',
  'fleet-bench': 'loadtest/fleet-bench.ts',
  stalls: 'loadtest/stalls.ts',
  faults: 'loadtest/faults.ts',
  upgrade: 'loadtest/upgrade.ts',
  instructions: 'loadtest/instructions.ts',
};

const USAGE = `npm run loadtest -- <scenario> [options]

scenarios: ${Object.keys(SCENARIOS).join(', ')}

  --duration S         seconds of load (each scenario has its default)
  --out DIR            where report.json, report.md and the SVG charts go (loadtest-results/<scenario>)
  --threshold 'EXPR'   k6-like, repeatable: METRIC:AGGREGATE OP NUMBER, e.g. 'call_duration:p(99)<250';
                       aggregates avg min max med count rate value p(N); a failed threshold exits 99
  --target URL         load a running relay or cluster front instead of starting one on 127.0.0.1
                       (framing, throughput: set PHONEBRIDGE_DATABASE_URL to the target's store)
  --phones N           simulated phones (capacity, storm, …)
  --time-scale F       multiplies every protocol limit (timeouts, soak); 1 = the real limits
  --redis-url URL      the Redis the scenario's nodes share (redis://, rediss://, redis+sentinel://,
                       redis+cluster://): throughput and relay-overhead take it repeatedly (one pass
                       each, Redis commands per call counted); fleet and upgrade take one; faults one
                       redis:// (Toxiproxy sits in front of it)
  --from REV           upgrade: the git revision rolled from (its nodes are replaced by this tree's)

--target is refused (exit 64, with the reason) by the scenarios that need relays they start
themselves: storm, capacity, soak, timeouts, fleet, faults, upgrade, relay-overhead
(docs/OPERATIONS.md, "Load tests and sizing").

relay-overhead also takes its own flags: --rounds N, --round-ms MS (or --duration S: the
length of each measured round), --conns N, --no-cluster, --no-strace, --low-rate N, --cpu-prof DIR,
--runs N, --cpu-limit CORES, --limit-conns N (loadtest/relay-overhead-scenario.ts).

instructions (valgrind's callgrind: the one-node relay and the uWS floor, instructions per small
call; with --cluster a cross-node call on two nodes too) takes --rounds N, --window-ms MS,
--warm-ms MS, --instrumented-warm-ms MS, --conns N, --functions N, --cluster, --distinct-args, --out DIR
(loadtest/instructions.ts).`;

const root = fileURLToPath(new URL('..', import.meta.url));

async function main(argv: string[]): Promise<number> {
  const name = argv.find((a) => !a.startsWith('-'));
  const file = name ? SCENARIOS[name] : undefined;
  if (argv.includes('--help') || argv.includes('-h') || !name) {
    console.log(USAGE);
    return name || argv.length ? 0 : 64;
  }
  if (!file || !existsSync(`${root}/${file}`)) {
    console.error(
      `unknown scenario "${name}"; known: ${Object.keys(SCENARIOS)
        .filter((k) => existsSync(`${root}/${SCENARIOS[k]}`))
        .join(', ')}`,
    );
    return 64;
  }
  // Importing a stand-alone script would run it here, so look before importing.
  const isScenario = /export\s+const\s+scenario\b/.test(readFileSync(`${root}/${file}`, 'utf8'));
  if (!isScenario) {
    const rest = argv.filter((a) => a !== name);
    const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', file, ...rest], {
      cwd: root,
      stdio: 'inherit',
      timeout: 30 * 60_000,
    });
    return r.status ?? 1;
  }
  const mod = (await import(pathToFileURL(`${root}/${file}`).href)) as { scenario: Scenario };
  const opts = parseOptions(argv, mod.scenario.options);
  // What a scenario cannot do is a usage error, refused before anything starts (exit 64).
  if (opts.target && mod.scenario.refusesTarget)
    throw new UsageError(`${name} cannot run against --target: ${mod.scenario.refusesTarget}`);
  mod.scenario.validate?.(opts);
  return runScenario(mod.scenario, opts, `npm run loadtest -- ${argv.join(' ')}`);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError || err instanceof ThresholdSyntaxError) {
      console.error(`loadtest: ${err.message}`);
      process.exit(64);
    }
    console.error(`loadtest: ${(err as Error).stack ?? String(err)}`);
    process.exit(1);
  },
);
