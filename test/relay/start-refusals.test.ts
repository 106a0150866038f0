// What `phonebridge serve` cannot start on: a data dir that is no directory (or too long a path
// for its socket), a database it cannot
// reach or use, TLS files it cannot serve from. Each is a ConfigError (exit 2) naming the flag, with no password in it, and the
// relay is not left listening.
import { afterAll, describe, expect, it } from 'vitest';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { startTestRelay, tempDir } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';
import { selfSignedCert } from '../helpers/tls.ts';
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

/** A 127.0.0.1 port nothing listens on. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
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

  // OPERATIONS "Exit codes": "`2` when the relay cannot start as configured (… a setting it
  // refuses …)". The embedded store's socket lives in the data dir, <dir>/.cli/.s.PGSQL.5432 the
  // longer of its two paths, and a Unix socket path has at most 103 bytes (macOS; 107 on Linux).
  it('a --data-dir too long for the Unix socket inside it: exit 2 with one line naming --data-dir and the limit', async () => {
    const base = dir();
    const long = join(base, 'x'.repeat(100 - base.length));
    const child = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', long]);
    children.push(child);
    expect((await child.exited).code).toBe(2);
    expect(child.stderr).toHaveLength(1);
    expect(child.stderr[0]).toMatch(
      /^phonebridge: --data-dir \S+ is too long for a Unix socket inside it \(.* at most 103\)/,
    );
  });

  it('with --database-url too (only relay.json goes there): refused before listening, not after', async () => {
    const file = join(dir(), 'not-a-dir');
    writeFileSync(file, 'x');
    const err = await startTestRelay(['--database-url', POSTGRES.href], { dataDir: file }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`--data-dir ${file} is not a directory`);
  });
});

describe('serve refuses a database it cannot reach or use', () => {
  it('an unreachable host: exit 2, the flag and the URL without its password', async () => {
    const port = await closedPort();
    const url = `postgres://pb:s3cret-pw@127.0.0.1:${port}/pb`;
    const child = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', dir(), '--database-url', url]);
    children.push(child);
    expect((await child.exited).code).toBe(2);
    const out = child.stderr.join('\n');
    expect(out).toBe(
      `phonebridge: --database-url: cannot start on postgres://pb:***@127.0.0.1:${port}/pb: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
  });

  it('a database or role that does not exist, and a scheme that is not Postgres, are ConfigErrors naming the flag', async () => {
    const noDb = new URL(POSTGRES.href);
    noDb.pathname = '/pb_no_such_database';
    noDb.password = 'pw-not-logged';
    for (const [url, words] of [
      [
        noDb.href,
        /^--database-url: cannot start on postgres:\/\/.*:\*\*\*@.*\/pb_no_such_database: database "pb_no_such_database" does not exist$/,
      ],
      ['mysql://u:pw-not-logged@127.0.0.1/x', /^--database-url must start with postgres:\/\/ \(got mysql:\/\/\)$/],
      ['not a url', /^--database-url is not a valid URL/],
    ] as const) {
      const err = await startTestRelay(['--database-url', url], { dataDir: dir() }).catch((e: Error) => e);
      expect(err, url).toBeInstanceOf(ConfigError);
      expect((err as Error).message, url).toMatch(words);
      expect((err as Error).message).not.toContain('pw-not-logged');
    }
  });
});

// The one-shot commands open the same database (services/cli.ts withStore): a URL they cannot
// use is the same setting to fix as for serve, worded by the same code (services/serve.ts).
describe('the commands that open the database refuse one they cannot reach or use like serve does', () => {
  async function run(args: string[], env: Record<string, string> = {}) {
    const child = startChild([...args, '--data-dir', dir()], env);
    children.push(child);
    const { code } = await child.exited;
    return { code, stderr: child.stderr.join('\n') };
  }

  it('an unreachable host: exit 2, one line with the flag and the URL without its password', async () => {
    const port = await closedPort();
    const url = `postgres://pb:s3cret-pw@127.0.0.1:${port}/pb`;
    const commands = [
      ['keys', 'list'],
      ['keys', 'create', '--device', 'dev_x'],
      ['keys', 'revoke', 'key_x'],
      ['devices', 'list'],
      ['devices', 'remove', 'dev_x'],
      ['accounts', 'list'],
      ['pair', '--json'],
      ['enroll', 'list'],
    ];
    const results = await Promise.all(commands.map((c) => run([...c, '--database-url', url])));
    results.forEach((r, i) => {
      expect(r, commands[i].join(' ')).toEqual({
        code: 2,
        stderr: `phonebridge: --database-url: cannot start on postgres://pb:***@127.0.0.1:${port}/pb: connect ECONNREFUSED 127.0.0.1:${port}`,
      });
    });
  });

  it('PHONEBRIDGE_DATABASE_URL, a missing database and a URL that is not Postgres: exit 2 naming the flag, no password', async () => {
    const noDb = new URL(POSTGRES.href);
    noDb.pathname = '/pb_no_such_database';
    noDb.password = 'pw-not-logged';
    const cases = [
      [
        ['devices', 'list', '--database-url', noDb.href],
        /^phonebridge: --database-url: cannot start on postgres:\/\/.*:\*\*\*@.*\/pb_no_such_database: database "pb_no_such_database" does not exist$/,
      ],
      [
        ['accounts', 'list', '--database-url', 'mysql://u:pw-not-logged@127.0.0.1/x'],
        /^phonebridge: --database-url must start with postgres:\/\/ \(got mysql:\/\/\)$/,
      ],
      [['keys', 'list', '--database-url', 'not a url'], /^phonebridge: --database-url is not a valid URL/],
    ] as const;
    const results = await Promise.all([
      ...cases.map(([args]) => run([...args])),
      run(['keys', 'list'], { PHONEBRIDGE_DATABASE_URL: noDb.href }),
    ]);
    for (const [i, [args, words]] of [...cases, [['env'], cases[0][1]] as const].entries()) {
      expect(results[i].code, args.join(' ')).toBe(2);
      expect(results[i].stderr, args.join(' ')).toMatch(words);
      expect(results[i].stderr).not.toContain('pw-not-logged');
    }
  });
});

async function serveExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = startChild(['serve', '--port', '0', '--admin-port', '0', ...args]);
  children.push(child);
  const timeout = setTimeout(() => child.proc.kill('SIGKILL'), 30_000);
  const { code } = await child.exited;
  clearTimeout(timeout);
  return { code, stderr: child.stderr.join('\n') };
}

// uWebSockets.js answers a file it cannot use with an unnamed "App construction failed", or a
// bare ENOENT: the files are checked first (services/tls-files.ts), never quoting what they hold.
describe('serve refuses TLS files it cannot serve from', () => {
  it('a --tls-cert file that does not exist: exit 2 with one line naming --tls-cert', async () => {
    const d = dir();
    const { key } = selfSignedCert(d, 'a');
    const missing = join(d, 'missing.crt');
    const r = await serveExit(['--data-dir', d, '--tls-cert', missing, '--tls-key', key]);
    expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
    expect(r.stderr).toBe(`phonebridge: --tls-cert ${missing} does not exist`);
  }, 60_000);

  it('a --tls-key that does not belong to --tls-cert: exit 2 with one line naming both flags', async () => {
    const d = dir();
    const a = selfSignedCert(d, 'a');
    const b = selfSignedCert(d, 'b');
    const r = await serveExit(['--data-dir', d, '--tls-cert', a.cert, '--tls-key', b.key]);
    expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
    expect(r.stderr).toBe(
      `phonebridge: --tls-key ${b.key} is not the private key of the certificate in --tls-cert ${a.cert}`,
    );
    // Nothing of the key file is in the line.
    const keyBody = readFileSync(b.key, 'utf8').split('\n')[1];
    expect(r.stderr).not.toContain(keyBody);
  }, 60_000);

  it('a --tls-key file that is not a PEM key: exit 2 with one line naming --tls-key, not its content', async () => {
    const d = dir();
    const a = selfSignedCert(d, 'a');
    const bad = join(d, 'bad.key');
    writeFileSync(bad, 'not a key but a s3cret-looking line\n');
    const r = await serveExit(['--data-dir', d, '--tls-cert', a.cert, '--tls-key', bad]);
    expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
    expect(r.stderr).toBe(`phonebridge: --tls-key ${bad} is not an unencrypted PEM private key`);
  }, 60_000);

  it('a --tls-cert file that is a key, not a certificate: exit 2 naming --tls-cert', async () => {
    const d = dir();
    const a = selfSignedCert(d, 'a');
    const r = await serveExit(['--data-dir', d, '--tls-cert', a.key, '--tls-key', a.key]);
    expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
    expect(r.stderr).toBe(`phonebridge: --tls-cert ${a.key} is not a PEM certificate`);
  }, 60_000);
});
