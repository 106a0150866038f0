// `phonebridge serve --tls-cert F --tls-key F` with files it cannot serve TLS from — a missing
// file, a key that is not PEM, a key of another certificate — stops before listening with exit 2
// and one line naming the flag (services/tls-files.ts), not with uWebSockets.js's unnamed
// "App construction failed" or a bare ENOENT, and never with what the files hold.
import { afterAll, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';

const dirs: string[] = [];
const children: Child[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir('pb-tls-');
  dirs.push(d);
  return d;
}

/** A self-signed P-256 certificate and its key in `d`, named `<name>.crt` / `<name>.key`. */
function selfSigned(d: string, name: string): { cert: string; key: string } {
  const cert = join(d, `${name}.crt`);
  const key = join(d, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-subj',
      `/CN=${name}`,
      '-days',
      '1',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

async function serveExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = startChild(['serve', '--port', '0', '--admin-port', '0', ...args]);
  children.push(child);
  const timeout = setTimeout(() => child.proc.kill('SIGKILL'), 30_000);
  const { code } = await child.exited;
  clearTimeout(timeout);
  return { code, stderr: child.stderr.join('\n') };
}

it('a --tls-cert file that does not exist: exit 2 with one line naming --tls-cert', async () => {
  const d = dir();
  const { key } = selfSigned(d, 'a');
  const missing = join(d, 'missing.crt');
  const r = await serveExit(['--data-dir', d, '--tls-cert', missing, '--tls-key', key]);
  expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
  expect(r.stderr).toBe(`phonebridge: --tls-cert ${missing} does not exist`);
}, 60_000);

it('a --tls-key that does not belong to --tls-cert: exit 2 with one line naming both flags', async () => {
  const d = dir();
  const a = selfSigned(d, 'a');
  const b = selfSigned(d, 'b');
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
  const a = selfSigned(d, 'a');
  const bad = join(d, 'bad.key');
  writeFileSync(bad, 'not a key but a s3cret-looking line\n');
  const r = await serveExit(['--data-dir', d, '--tls-cert', a.cert, '--tls-key', bad]);
  expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
  expect(r.stderr).toBe(`phonebridge: --tls-key ${bad} is not an unencrypted PEM private key`);
}, 60_000);

it('a --tls-cert file that is a key, not a certificate: exit 2 naming --tls-cert', async () => {
  const d = dir();
  const a = selfSigned(d, 'a');
  const r = await serveExit(['--data-dir', d, '--tls-cert', a.key, '--tls-key', a.key]);
  expect(r.code, `exit code (stderr: ${r.stderr})`).toBe(2);
  expect(r.stderr).toBe(`phonebridge: --tls-cert ${a.key} is not a PEM certificate`);
}, 60_000);
