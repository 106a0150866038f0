// `phonebridge pair [--name N] [--account A] [--json]`: one line, the QR payload
// {"v":1,"relay":"https://…","code":"…","fp":"sha256:<hex>"}, fp being the TLS pin serve left in
// relay.json (README: "Only the public URL comes from `serve` by itself, through `relay.json` in
// the data dir"; docs/OPERATIONS.md: with --tls-cert "the QR then carries the leaf's SPKI pin
// (`fp`)"). "Every flag of `serve` has an environment twin `PHONEBRIDGE_<FLAG>`" (README), and
// pair reads PHONEBRIDGE_PUBLIC_URL / --public-url as serve does: trailing slashes dropped, an
// http(s) URL or refused. Its --account is an ACCOUNT as the usage defines it: "an id or an email".
// `enroll create` builds its QR the same way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import pg from 'pg';
import { createDatabase } from '../cluster/harness.ts';
import { openStore, type OpenStore } from '../../src/store/index.ts';
import { parseRelayConfig } from '../../src/config.ts';
import { writeRelayInfo } from '../../services/relay-info.ts';
import { hashPairingCode, newId } from '../../src/crypto/secrets.ts';
import { tempDir } from '../helpers/relay.ts';
import { cliResult } from '../helpers/processes.ts';

let db: { url: string; drop(): Promise<void> };
let opened: OpenStore;
const dirs: string[] = [];
function dir(): string {
  const d = tempDir('pb-pair-');
  dirs.push(d);
  return d;
}
beforeAll(async () => {
  db = await createDatabase();
  opened = await openStore({ databaseUrl: db.url, dataDir: dir(), role: 'cli' });
}, 60_000);
afterAll(async () => {
  await opened?.close();
  await db?.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the QR payload of pair --json and enroll create --json', () => {
  it("keeps serve's TLS pin when PHONEBRIDGE_PUBLIC_URL has the trailing slash serve dropped", async () => {
    const data = dir();
    const env = { PHONEBRIDGE_PUBLIC_URL: 'https://relay.example.com/' };
    // What serve writes to relay.json for that same environment (services/serve.ts).
    const config = parseRelayConfig(['--data-dir', data], env);
    const fp = `sha256:${'ab'.repeat(32)}`;
    writeRelayInfo(data, { publicUrl: config.publicUrl, fingerprint: fp });
    const [pair, enroll] = await Promise.all([
      cliResult(['pair', '--json', '--data-dir', data, '--database-url', db.url], env),
      cliResult(
        [
          'enroll',
          'create',
          '--max-phones',
          '1',
          '--expires',
          '1h',
          '--json',
          '--data-dir',
          data,
          '--database-url',
          db.url,
        ],
        env,
      ),
    ]);
    expect(pair.code, pair.stderr).toBe(0);
    expect(JSON.parse(pair.stdout)).toMatchObject({ relay: 'https://relay.example.com', fp });
    expect(enroll.code, enroll.stderr).toBe(0);
    expect(JSON.parse(enroll.stdout).qr).toMatchObject({ relay: 'https://relay.example.com', fp });
  }, 120_000);

  it('refuses a --public-url that is no http(s) URL as a usage error, with no code made', async () => {
    const r = await cliResult([
      'pair',
      '--json',
      '--public-url',
      'relay.example.com',
      '--data-dir',
      dir(),
      '--database-url',
      db.url,
    ]);
    expect(r.stdout).toBe('');
    expect(r.code).toBe(64);
    expect(r.stderr.split('\n')[0]).toMatch(/--public-url/);
  }, 120_000);

  it('takes an email for --account, as enroll create and keys create do', async () => {
    const made = await opened.store.createAccount({
      id: newId('acct'),
      email: 'pair@example.com',
      maxDevices: 3,
      maxKeys: 10,
    });
    if (!made.ok) throw new Error(made.error);
    const r = await cliResult([
      'pair',
      '--json',
      '--account',
      'Pair@Example.com',
      '--data-dir',
      dir(),
      '--database-url',
      db.url,
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const qr = JSON.parse(r.stdout);
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      const { rows } = await c.query('select account_id from pairing_codes where code_hash = $1', [
        hashPairingCode(qr.code),
      ]);
      expect(rows[0]?.account_id).toBe(made.account.id);
    } finally {
      await c.end();
    }
  }, 120_000);
});
