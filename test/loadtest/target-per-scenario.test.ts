// Contract (docs/OPERATIONS.md, "Load tests and sizing"):
//   `npm run loadtest -- <scenario> [--duration S] [--out DIR] [--threshold 'EXPR']… [--target URL]
//    [--phones N] [--time-scale F]` — scenarios include `relay-overhead`, `framing`, `timeouts`,
//   `throughput`, `capacity`, `storm`, `soak`, `upgrade --from <git-rev>`, `faults`, `fleet`.
// --target per scenario, as the table there decides: framing and throughput load the target;
// the others need relays they start themselves (they kill them, read their memory, put a proxy
// before their stores, start two builds, or read their CPU) and refuse --target before anything
// starts, as a usage error (exit 64) with one line naming why (Scenario.refusesTarget).
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { loadtest } from './contract-helpers.ts';

const TARGET = 'http://127.0.0.1:9';
const out = mkdtempSync(join(tmpdir(), 'pb-loadtest-target-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const REFUSED: Array<[string, string[], RegExp]> = [
  ['storm', [], /kills and restarts the node/],
  ['capacity', [], /reads the memory of the relay process/],
  ['soak', [], /samples the memory and handles of the relay process/],
  ['timeouts', [], /sets the relay's deadline/],
  ['fleet', [], /starts its own two nodes/],
  ['faults', [], /puts Toxiproxy between the nodes it starts and their Redis and Postgres/],
  ['upgrade', ['--from', 'HEAD'], /starts the nodes of --from and of this tree/],
  ['relay-overhead', [], /measures the CPU of the relay processes it starts/],
];

describe('--target URL, per scenario', () => {
  it('is refused by the scenarios that need their own relays: exit 64, one line naming why', async () => {
    // Eight processes at once, each importing its scenario (about 2.5 s of CPU apiece) on two
    // cores shared with the rest of the suite: the bound is for a hang, not a speed.
    const runs = await Promise.all(
      REFUSED.map(([s, extra]) =>
        loadtest([s, ...extra, '--target', TARGET, '--duration', '1', '--out', join(out, s)], 100_000),
      ),
    );
    REFUSED.forEach(([s, , why], i) => {
      expect(runs[i].code, s).toBe(64);
      const line = runs[i].out.split('\n').find((l) => l.includes('--target'));
      expect(line, s).toMatch(new RegExp(`^loadtest: ${s} cannot run against --target: `));
      expect(line, s).toMatch(why);
    });
  }, 120_000);

  it.each(['framing', 'throughput'])(
    'is taken by %s, which loads the target (here: fails on its store)',
    async (s) => {
      const env = { ...process.env };
      delete env.PHONEBRIDGE_DATABASE_URL;
      delete env.PHONEBRIDGE_DATA_DIR;
      const r = await loadtest([s, '--target', TARGET, '--duration', '1', '--out', join(out, s)], 40_000, env);
      expect(r.out).not.toMatch(/cannot run against --target/);
      expect(r.out).toMatch(/--target needs the target's store/);
      expect(r.code).toBe(1);
    },
    50_000,
  );
});
