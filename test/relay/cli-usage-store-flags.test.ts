// The usage says "Every command takes --data-dir / --database-url like serve" (the CLI contract:
// "Every CLI command takes the same `--data-dir` / `--database-url` as `serve`"), which of them
// work on that database, and that device run opens none and ignores them. Each command accepts
// them (test/relay/device-run-store-flags.test.ts: what device run does with them).
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { tempDir } from '../helpers/relay.ts';
import { cliResult } from '../helpers/processes.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('phonebridge --help on --data-dir / --database-url', () => {
  it('names the commands that take them, and each accepts them', async () => {
    const help = await cliResult(['--help']);
    expect(help.stdout).toMatch(/Every command takes --data-dir \/ --database-url like serve/);
    expect(help.stdout).toMatch(/pair, keys, devices, enroll and accounts work on that database/);
    expect(help.stdout).toMatch(/device run opens\s+no database and ignores them/);
    const d = tempDir('pb-usage-');
    dirs.push(d);
    // --nope stops each command before it opens anything; the parser names the first unknown option.
    const named = [
      ['pair'],
      ['keys', 'list'],
      ['devices', 'list'],
      ['enroll', 'list'],
      ['accounts', 'list'],
      ['demo'],
      ['device', 'run', '--state', d],
    ];
    const results = await Promise.all(
      named.map((cmd) => cliResult([...cmd, '--data-dir', d, '--database-url', 'postgres://127.0.0.1:1/x', '--nope'])),
    );
    for (const [i, r] of results.entries()) {
      expect(r.code, named[i].join(' ')).toBe(64);
      expect(r.stderr, named[i].join(' ')).toMatch(/Unknown option '--nope'/);
    }
  }, 120_000);
});
