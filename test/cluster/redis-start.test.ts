// A topology that is wrong or not there stops `phonebridge serve` at start: one line naming
// what was tried and what answered, exit 2 (not a node that runs without its bus).
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { startChild, type Child } from '../helpers/processes.ts';
import { tempDir } from '../helpers/relay.ts';

const children: Child[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function serveWith(redisUrl: string): Promise<{ code: number | null; lines: string[]; ms: number }> {
  const dir = tempDir('pb-redis-start-');
  dirs.push(dir);
  const t0 = Date.now();
  const c = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', dir, '--redis-url', redisUrl]);
  children.push(c);
  const { code } = await c.exited;
  return { code, lines: c.stderr.filter((l) => l.trim() !== ''), ms: Date.now() - t0 };
}

describe('serve --redis-url: wrong or unreachable topologies', () => {
  it('exits 2 with one line for each', async () => {
    const cases: Array<[string, RegExp]> = [
      ['redis+sentinel://127.0.0.1:26399', /^phonebridge: --redis-url redis\+sentinel:\/\/ needs the master name/],
      ['redis://127.0.0.1:7099', /^phonebridge: --redis-url: cannot start on Redis at 127\.0\.0\.1:7099: /],
      // A plain Redis named as a cluster: what it answered.
      [
        'redis+cluster://127.0.0.1:6379',
        /^phonebridge: --redis-url: cannot start on Redis Cluster via 127\.0\.0\.1:6379: .*; 127\.0\.0\.1:6379 ERR This instance has cluster support disabled/,
      ],
      // A plain Redis named as a sentinel: what it answered, after the start's 10 s.
      [
        'redis+sentinel://127.0.0.1:6379/pbmaster',
        /^phonebridge: --redis-url: cannot start on Sentinel master "pbmaster" \(db 0\) via sentinels 127\.0\.0\.1:6379: .*unknown command 'sentinel'/,
      ],
    ];
    const results = await Promise.all(cases.map(([url]) => serveWith(url)));
    results.forEach(({ code, lines, ms }, i) => {
      expect(code, cases[i][0]).toBe(2);
      expect(lines, cases[i][0]).toHaveLength(1);
      expect(lines[0]).toMatch(cases[i][1]);
      expect(ms).toBeLessThan(90_000); // no hang: the sentinel case gives up after 10 s; the rest is process start on a loaded machine
    });
  }, 110_000);
});
