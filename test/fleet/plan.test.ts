// Fleet keys count against the account's key cap (hosted plans) together with device API keys,
// both ways, and revoking one frees its slot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/store/test-support.ts';
import { createStore, type DatabaseSource, type Store } from '../../src/store/index.ts';
import { createFleetKey, FleetKeyError } from '../../src/fleet/keys.ts';
import { createKey } from '../../src/provisioning.ts';
import { hashPairingCode, newId, newPairingCode } from '../../src/crypto/secrets.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';

const backend = postgresBackend();
let source: DatabaseSource;
let store: Store;
beforeAll(async () => {
  source = await backend.open();
  store = await createStore(source);
});
afterAll(async () => {
  await store?.close();
  await source?.close();
  await backend.cleanup();
});

describe('the key cap', () => {
  it('counts fleet keys and device keys together', async () => {
    const r = await store.createAccount({ id: newId('acct'), email: null, maxDevices: 5, maxKeys: 2 });
    if (!r.ok) throw new Error('account');
    const accountId = r.account.id;
    const code = newPairingCode();
    await store.createPairingCode({
      accountId,
      codeHash: hashPairingCode(code),
      expiresAt: new Date(Date.now() + 60_000),
    });
    const paired = await store.redeemPairingCode({
      codeHash: hashPairingCode(code),
      deviceId: newId('dev'),
      publicKey: generateDeviceKey().publicKeySpkiBase64,
      name: 'p',
      now: new Date(),
    });
    if (!paired.ok) throw new Error('pairing');

    await createKey(store, paired.device.id);
    const fleet = await createFleetKey(store, { accountId, scopes: ['devices:read'] });
    await expect(createFleetKey(store, { accountId, scopes: ['devices:read'] })).rejects.toBeInstanceOf(FleetKeyError);
    await expect(createKey(store, paired.device.id)).rejects.toThrow(/plan limit for keys/);
    expect(await store.fleet.revokeKey(fleet.id)).toBe(true);
    await expect(createKey(store, paired.device.id)).resolves.toMatchObject({ device_id: paired.device.id });
  });
});
