// The commands that act on one thing take one ID: `keys revoke ID`, `devices remove ID`,
// `enroll revoke ID`, `accounts lock ACCOUNT` (the usage: "A command that takes an ID or ACCOUNT
// takes one (a second is refused)"). Given two, the command is a usage error (docs/OPERATIONS.md "Exit
// codes": "`64` for a usage error") and changes nothing: it never reports success while the
// second key, phone, code or account stays as it was — an operator revoking a leaked pair of
// keys in one line would believe both dead.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../cluster/harness.ts';
import { openStore, type OpenStore } from '../../src/store/index.ts';
import { registerDevices } from '../../src/provisioning.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { createEnrollment } from '../../src/fleet/enroll.ts';
import { newId } from '../../src/crypto/secrets.ts';
import { tempDir } from '../helpers/relay.ts';
import { cliResult } from '../helpers/processes.ts';

let db: { url: string; drop(): Promise<void> };
let opened: OpenStore;
beforeAll(async () => {
  db = await createDatabase();
  opened = await openStore({ databaseUrl: db.url, dataDir: tempDir('pb-one-id-'), role: 'cli' });
}, 60_000);
afterAll(async () => {
  await opened?.close();
  await db?.drop();
});

const run = (...args: string[]) => cliResult([...args, '--database-url', db.url]);

/** Refused as a usage error whose first line says why. */
function refusedForTwo(r: { code: number | null; stderr: string }): void {
  expect(r.code, r.stderr).toBe(64);
  expect(r.stderr.split('\n')[0]).toMatch(/takes one .*got 2/);
}

describe('a one-ID command given two', () => {
  it('keys revoke K1 K2 is refused and both keys stay live', async () => {
    const scopes = ['devices:read' as const];
    const k1 = await createFleetKey(opened.store, { accountId: 'local', scopes });
    const k2 = await createFleetKey(opened.store, { accountId: 'local', scopes });
    refusedForTwo(await run('keys', 'revoke', k1.id, k2.id));
    const left = (await opened.store.fleet.listKeys()).map((k) => k.id);
    expect(left).toEqual(expect.arrayContaining([k1.id, k2.id]));
  }, 120_000);

  it('devices remove D1 D2 is refused and both phones stay', async () => {
    const [d1, d2] = await registerDevices(opened.store, {
      relay: 'http://127.0.0.1:8080',
      count: 2,
      publicKey: generateDeviceKey().publicKeySpkiBase64,
      namePrefix: 'one-id-',
    });
    refusedForTwo(await run('devices', 'remove', d1, d2));
    const left = (await opened.store.listDevices()).map((d) => d.id);
    expect(left).toEqual(expect.arrayContaining([d1, d2]));
  }, 120_000);

  it('enroll revoke E1 E2 is refused and both codes stay active', async () => {
    const make = () =>
      createEnrollment(opened.store, { accountId: 'local', maxPhones: 1, expiresMs: 3600_000, relay: 'http://x' });
    const [e1, e2] = [await make(), await make()];
    refusedForTwo(await run('enroll', 'revoke', e1.id, e2.id));
    const revoked = (await opened.store.fleet.listEnrollments()).filter((e) => e.revokedAt !== null);
    expect(revoked).toEqual([]);
  }, 120_000);

  it('accounts lock A1 A2 is refused and neither account is locked', async () => {
    const make = async (email: string) => {
      const r = await opened.store.createAccount({ id: newId('acct'), email, maxDevices: 3, maxKeys: 10 });
      if (!r.ok) throw new Error(r.error);
      return r.account.id;
    };
    const a1 = await make('one-id-1@example.com');
    const a2 = await make('one-id-2@example.com');
    refusedForTwo(await run('accounts', 'lock', a1, 'one-id-2@example.com'));
    expect((await opened.store.getAccount(a1))?.locked).toBe(false);
    expect((await opened.store.getAccount(a2))?.locked).toBe(false);
  }, 120_000);
});
