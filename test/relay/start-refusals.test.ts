// What `phonebridge serve` cannot start on: a data dir that is no directory, a database it cannot
// reach or use. Each is a ConfigError (exit 2) naming the flag, with no password in it, and the
// relay is not left listening.
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestRelay, tempDir } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';
import { ConfigError } from '../../src/config.ts';

const dirs: string[] = [];
const children: Child[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir('pb-refuse-');
  dirs.push(d);
  return d;
}

const POSTGRES = new URL(process.env.PHONEBRIDGE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');

describe('serve refuses a data dir it cannot use', () => {
  it('a --data-dir that is a file: exit 2 naming the flag, before anything listens', async () => {
    const file = join(dir(), 'not-a-dir');
    writeFileSync(file, 'x');
    const child = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', file]);
    children.push(child);
    expect((await child.exited).code).toBe(2);
    expect(child.stderr.join('\n')).toBe(`phonebridge: --data-dir ${file} is not a directory`);
  });

  it('with --database-url too (only relay.json goes there): refused before listening, not after', async () => {
    const file = join(dir(), 'not-a-dir');
    writeFileSync(file, 'x');
    const err = await startTestRelay(['--database-url', POSTGRES.href], { dataDir: file }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`--data-dir ${file} is not a directory`);
  });
});
