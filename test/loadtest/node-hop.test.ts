// A short run of loadtest/node-hop.bench.ts (docs/decisions/0211-direct-node-links-proposed.md):
// every way carries every request to the other process and its answer back, through a real Redis
// for the bus, and the report holds CPU and latency for each. Figures are not judged here
// (they are the bench's, on a quiet machine): only that the measurement is whole.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

it('sends every call every way and reports CPU and latency for each', () => {
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'loadtest/node-hop.bench.ts', '--rate', '200', '--seconds', '0.5', '--rounds', '1'],
    { cwd: ROOT, encoding: 'utf8', timeout: 45_000 },
  );
  expect(run.status, run.stderr).toBe(0);
  const json = run.stdout.slice(run.stdout.indexOf('{'), run.stdout.lastIndexOf('}') + 1);
  const report = JSON.parse(json) as {
    rate: number;
    rounds: Array<{
      way: string;
      calls: number;
      lost: number;
      nodesCpuUsPerCall: number;
      redisCpuUsPerCall: number;
      p50Ms: number;
    }>;
  };
  expect(report.rounds.map((r) => r.way).sort()).toEqual(['bounce', 'quiet', 'raw', 'redis', 'tcp']);
  for (const r of report.rounds) {
    // 200/s for 0.5 s, started on a 1 ms timer: about 100 calls, none unanswered.
    expect(r.calls).toBeGreaterThanOrEqual(90);
    expect(r.lost).toBe(0);
    expect(r.nodesCpuUsPerCall).toBeGreaterThan(0);
    expect(r.p50Ms).toBeGreaterThan(0);
  }
  for (const way of ['redis', 'quiet', 'bounce', 'raw'])
    expect(report.rounds.find((r) => r.way === way)!.redisCpuUsPerCall).toBeGreaterThan(0);
  expect(run.stdout).toMatch(/^redis at 200\/s: both processes [\d.]+ µs per round trip/m);
});
