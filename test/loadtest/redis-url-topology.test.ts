// Contract (docs/OPERATIONS.md, "Load tests and sizing"): "every scenario that uses Redis takes
// `--redis-url` of any topology". fleet, faults and upgrade run their nodes on the Redis given
// (loadtest/lib/relay.ts oneRedisUrl), so an unreachable one cannot pass; faults proxies one
// address and refuses a topology it cannot put Toxiproxy in front of, and the scenarios whose
// nodes share one bus refuse two URLs, each as a usage error (exit 64) naming why.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadtest } from './contract-helpers.ts';

const UNREACHABLE = 'redis://127.0.0.1:1';
const out = mkdtempSync(join(tmpdir(), 'pb-loadtest-redis-url-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('--redis-url reaches the nodes of the scenarios that use Redis', () => {
  it('fleet: two nodes on an unreachable --redis-url do not start (the run fails, not passes)', async () => {
    const dir = join(out, 'fleet');
    const r = await loadtest(
      ['fleet', '--redis-url', UNREACHABLE, '--phones', '10', '--duration', '1', '--out', dir],
      60_000,
    );
    expect(r.code).toBe(1);
    expect(r.out).not.toMatch(/PASSED/);
    expect(JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')).error).toMatch(
      /relay child exited before it was ready/,
    );
  }, 70_000);

  it('upgrade: the nodes of --from are started on the --redis-url given', async () => {
    const dir = join(out, 'upgrade');
    const r = await loadtest(
      ['upgrade', '--from', 'HEAD', '--redis-url', UNREACHABLE, '--phones', '2', '--duration', '1', '--out', dir],
      60_000,
    );
    expect(r.code).toBe(1);
    expect(JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')).error).toMatch(
      /cannot start on Redis at 127\.0\.0\.1:1\b/,
    );
  }, 70_000);

  it('faults: Toxiproxy forwards to the --redis-url given', async () => {
    const dir = join(out, 'faults');
    const r = await loadtest(['faults', '--redis-url', UNREACHABLE, '--duration', '1', '--out', dir], 60_000);
    expect(r.code).toBe(1);
    const rep = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
    expect(rep.figures.redis).toBe(UNREACHABLE);
    expect(rep.error).toMatch(/cannot start on Redis/);
  }, 70_000);

  it('faults refuses a topology Toxiproxy cannot sit in front of, saying why', async () => {
    for (const url of [
      'redis+sentinel://127.0.0.1:26379/mymaster',
      'redis+cluster://127.0.0.1:7000',
      'rediss://x:6380',
    ]) {
      const r = await loadtest(['faults', '--redis-url', url, '--out', join(out, 'faults-refused')], 30_000);
      expect(r.code, url).toBe(64);
      expect(r.out, url).toMatch(
        /faults puts Toxiproxy in front of one Redis address, so --redis-url must be redis:\/\//,
      );
    }
  }, 90_000);

  it('fleet, faults and upgrade refuse two --redis-url (their nodes share one bus)', async () => {
    const scenarios = ['fleet', 'faults', 'upgrade'];
    const runs = await Promise.all(
      scenarios.map((s) =>
        loadtest(
          [s, '--from', 'HEAD', '--redis-url', 'redis://127.0.0.1:6379', '--redis-url', 'redis://127.0.0.1:6380'],
          30_000,
        ),
      ),
    );
    scenarios.forEach((s, i) => {
      expect(runs[i].code, s).toBe(64);
      expect(runs[i].out, s).toMatch(new RegExp(`${s} takes one --redis-url \\(its nodes share one bus\\), got 2`));
    });
  }, 40_000);
});
