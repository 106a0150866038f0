// Input the fleet commands refuse rather than turn into something else in silence (a usage
// error: docs/OPERATIONS.md "Exit codes", "`64` for a usage error"; nothing made):
// - `enroll create --max-phones N`: "Numbers are decimal integers" (the usage) — Number() would
//   read 0x10 as 16 and 1e2 as 100.
// - `enroll create --labels k=v,…` naming one key twice, as `devices label` refuses it
//   (labels are Kubernetes labels, docs/decisions/0172-labels-and-selectors.md: one value a key).
// - `keys create --fleet --selector ""` or `--account ""`: README "Make a fleet key": "It
//   reaches every phone of the account matching its selector"; only an absent --selector means
//   every phone, as only an absent --scopes means every scope. An unset shell variable must not
//   widen a key to every phone, nor move it to another account. `devices list --selector ""`
//   likewise: a list of every phone is not the answer to a filter that came out empty.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../cluster/harness.ts';
import { openStore, type OpenStore } from '../../src/store/index.ts';
import { tempDir } from '../helpers/relay.ts';
import { cliResult } from '../helpers/processes.ts';

let db: { url: string; drop(): Promise<void> };
let opened: OpenStore;
beforeAll(async () => {
  db = await createDatabase();
  opened = await openStore({ databaseUrl: db.url, dataDir: tempDir('pb-fleet-input-'), role: 'cli' });
}, 60_000);
afterAll(async () => {
  await opened?.close();
  await db?.drop();
});

const run = (...args: string[]) => cliResult([...args, '--database-url', db.url]);

describe('enroll create', () => {
  it('refuses a --max-phones that is no decimal integer (0x10, 1e2, " ")', async () => {
    const results = await Promise.all(
      ['0x10', '1e2', ' '].map((n) => run('enroll', 'create', '--max-phones', n, '--expires', '1h', '--json')),
    );
    for (const r of results) {
      expect(r.code, r.stderr).toBe(64);
      expect(r.stderr.split('\n')[0]).toMatch(/--max-phones must be a positive decimal integer/);
    }
    expect(await opened.store.fleet.listEnrollments()).toEqual([]);
  }, 120_000);

  it('refuses --labels naming one key twice, in the words of devices label', async () => {
    const r = await run(
      'enroll',
      'create',
      '--max-phones',
      '2',
      '--expires',
      '1h',
      '--labels',
      'site=berlin,site=paris',
      '--json',
    );
    expect(r.code, r.stderr).toBe(64);
    expect(r.stderr.split('\n')[0]).toBe('phonebridge: label "site" given twice');
    expect(await opened.store.fleet.listEnrollments()).toEqual([]);
  }, 120_000);
});

describe('keys create --fleet', () => {
  it('refuses an empty --selector or --account and makes no key', async () => {
    const [selector, account] = await Promise.all([
      run('keys', 'create', '--fleet', '--selector', '', '--json'),
      run('keys', 'create', '--fleet', '--account', '', '--json'),
    ]);
    expect(selector.code, selector.stderr).toBe(64);
    expect(selector.stderr.split('\n')[0]).toMatch(/--selector needs at least one requirement/);
    expect(account.code, account.stderr).toBe(64);
    expect(await opened.store.fleet.listKeys()).toEqual([]);
  }, 120_000);
});

describe('devices list', () => {
  it('refuses an empty --selector, in the words of keys create', async () => {
    const r = await run('devices', 'list', '--selector', ' ', '--json');
    expect(r.code, r.stderr).toBe(64);
    expect(r.stderr.split('\n')[0]).toMatch(/devices list: --selector needs at least one requirement/);
    expect(r.stdout).toBe('');
  }, 120_000);
});
