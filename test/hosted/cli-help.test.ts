// The command line as a person meets it: every command's --help is the usage, and an error that is
// not a usage mistake (a data directory in use) is not followed by the usage.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, startChild, type Child } from '../helpers/processes.ts';
import { tempDir } from '../helpers/relay.ts';

const run = promisify(execFile);
const children: Child[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill()));
});

async function phonebridge(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [BIN, ...args], { env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn' } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('phonebridge --help', () => {
  it('every command prints the usage for --help, without "Unknown option"', async () => {
    for (const args of [
      ['device', 'run', '--help'],
      ['keys', 'create', '--help'],
      ['serve', '-h'],
      ['pair', '--help'],
    ]) {
      const r = await phonebridge(args);
      expect(r.stderr, args.join(' ')).not.toMatch(/Unknown option/);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout).toContain('phonebridge device run --state DIR');
    }
  }, 60_000);

  it('a second serve on a data directory in use prints its error, not the usage', async () => {
    const dataDir = tempDir('pb-busy-');
    const first = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', dataDir]);
    children.push(first);
    await first.ready;
    const second = await phonebridge(['serve', '--port', '0', '--admin-port', '0', '--data-dir', dataDir]);
    expect(second.code).not.toBe(0);
    expect(second.stderr).toMatch(/phonebridge: /);
    expect(second.stderr).not.toContain('phonebridge device run --state DIR');
  }, 60_000);
});
