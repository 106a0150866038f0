// `phonebridge accounts create --email E [--phones N] [--keys N]` and `accounts plan ACCOUNT
// --phones N|unlimited --keys N|unlimited` (the usage): a cap is "unlimited" or a decimal
// integer ("Numbers are decimal integers"), anything else a usage error (docs/OPERATIONS.md
// "Exit codes": "`64` for a usage error") that changes nothing — `--phones ""` (an unset shell
// variable) is not a cap of 0. `accounts list` shows "keys N/max": N is what the cap counts,
// "A plan's key cap counts API keys, fleet keys and OAuth connections together" (OPERATIONS).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../cluster/harness.ts';
import { openStore, type OpenStore } from '../../src/store/index.ts';
import { createFleetKey, FleetKeyError } from '../../src/fleet/keys.ts';
import { newId } from '../../src/crypto/secrets.ts';
import { DEFAULT_PLAN } from '../../src/hosted/plans.ts';
import { tempDir } from '../helpers/relay.ts';
import { cliResult } from '../helpers/processes.ts';

let db: { url: string; drop(): Promise<void> };
let opened: OpenStore;
beforeAll(async () => {
  db = await createDatabase();
  opened = await openStore({ databaseUrl: db.url, dataDir: tempDir('pb-accounts-'), role: 'cli' });
}, 60_000);
afterAll(async () => {
  await opened?.close();
  await db?.drop();
});

const run = (...args: string[]) => cliResult(['accounts', ...args, '--database-url', db.url]);

async function account(email: string, maxDevices: number | null, maxKeys: number | null): Promise<string> {
  const r = await opened.store.createAccount({ id: newId('acct'), email, maxDevices, maxKeys });
  if (!r.ok) throw new Error(r.error);
  return r.account.id;
}

describe('accounts plan and create: caps are decimal integers or "unlimited"', () => {
  it('accounts plan --phones "" is refused and the plan stays', async () => {
    const id = await account('plan@example.com', DEFAULT_PLAN.maxDevices, DEFAULT_PLAN.maxKeys);
    const r = await run('plan', id, '--phones', '', '--keys', '5');
    expect(r.code, r.stderr).toBe(64);
    expect(r.stderr.split('\n')[0]).toMatch(/--phones must be a non-negative decimal integer/);
    expect(await opened.store.getAccount(id)).toMatchObject({
      maxDevices: DEFAULT_PLAN.maxDevices,
      maxKeys: DEFAULT_PLAN.maxKeys,
    });
  }, 120_000);

  it('accounts create --keys " " or --phones 1e2 is refused and makes no account', async () => {
    const [blank, exp] = await Promise.all([
      run('create', '--email', 'blank@example.com', '--keys', ' ', '--json'),
      run('create', '--email', 'exp@example.com', '--phones', '1e2', '--json'),
    ]);
    expect(blank.code, blank.stderr).toBe(64);
    expect(exp.code, exp.stderr).toBe(64);
    expect(exp.stderr.split('\n')[0]).toMatch(/--phones must be a non-negative decimal integer.*"1e2"/);
    expect(await opened.store.accountByEmail('blank@example.com')).toBeUndefined();
    expect(await opened.store.accountByEmail('exp@example.com')).toBeUndefined();
  }, 120_000);
});

describe('accounts list --json', () => {
  it('counts the fleet keys the key cap counts', async () => {
    const id = await account('cap@example.com', 1, 1);
    await createFleetKey(opened.store, { accountId: id, scopes: ['devices:read'] });
    // The cap is reached: a second key is refused…
    await expect(createFleetKey(opened.store, { accountId: id, scopes: ['devices:read'] })).rejects.toBeInstanceOf(
      FleetKeyError,
    );
    // …so the listing must not say 0 of 1 keys are used.
    const r = await run('list', '--json');
    expect(r.code, r.stderr).toBe(0);
    const row = JSON.parse(r.stdout).find((a: { id: string }) => a.id === id);
    expect(row).toMatchObject({ max_keys: 1, keys: 1 });
  }, 120_000);
});
