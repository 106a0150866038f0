// The usage says which commands take --data-dir / --database-url: "pair, keys, devices, enroll
// and accounts take --data-dir / --database-url like serve …; demo takes every serve flag;
// device run opens no database (its phone lives in --state)". Each command it names accepts
// them, and device run, which it says opens none, does not offer them.
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
    expect(help.stdout).not.toMatch(/Every command takes/);
    expect(help.stdout).toMatch(/pair, keys, devices, enroll and accounts take --data-dir \/ --database-url/);
    expect(help.stdout).toMatch(/device run opens no database/);
    const d = tempDir('pb-usage-');
    dirs.push(d);
    // --nope stops each command before it opens anything; the parser names the first unknown option.
    const named = [['pair'], ['keys', 'list'], ['devices', 'list'], ['enroll', 'list'], ['accounts', 'list'], ['demo']];
    const results = await Promise.all(
      named.map((cmd) => cliResult([...cmd, '--data-dir', d, '--database-url', 'postgres://127.0.0.1:1/x', '--nope'])),
    );
    for (const [i, r] of results.entries()) {
      expect(r.code, named[i].join(' ')).toBe(64);
      expect(r.stderr, named[i].join(' ')).toMatch(/Unknown option '--nope'/);
    }
    const device = await cliResult(['device', 'run', '--state', d, '--data-dir', d]);
    expect(device.code).toBe(64);
    expect(device.stderr).toMatch(/Unknown option '--data-dir'/);
  }, 120_000);
});
