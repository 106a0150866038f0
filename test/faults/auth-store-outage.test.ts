// Known keys through a store outage longer than the credential cache's TTL: an Authenticator
// on a real Postgres reached through Toxiproxy (cut = the database gone), with a 300 ms TTL in
// place of 30 s. A key checked before the outage keeps working (at once while the node knows
// the store is down, else once the store's error comes back); a key never seen fails with the
// store's error; an invalidation received meanwhile still ends a key at once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authenticator } from '../../src/gateway/auth.ts';
import { createKey, registerDevices } from '../../src/provisioning.ts';
import { openStore, type OpenStore } from '../../src/store/index.ts';
import { createDatabase } from '../cluster/harness.ts';
import { startToxiproxy, type Proxy, type Toxiproxy } from '../helpers/toxiproxy.ts';

let db: Awaited<ReturnType<typeof createDatabase>>;
let tp: Toxiproxy;
let proxy: Proxy;
let direct: OpenStore;
let proxied: OpenStore;
let dir: string;

beforeAll(async () => {
  db = await createDatabase();
  tp = await startToxiproxy();
  proxy = await tp.proxy('pg', '127.0.0.1:5432');
  dir = mkdtempSync(join(tmpdir(), 'pb-auth-outage-'));
  direct = await openStore({ dataDir: dir, databaseUrl: db.url, role: 'cli' });
  proxied = await openStore({ dataDir: dir, databaseUrl: proxy.through(db.url), role: 'cli' });
}, 60_000);
afterAll(async () => {
  await proxied?.close().catch(() => {});
  await direct?.close().catch(() => {});
  await tp?.stop();
  await db?.drop();
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('credential cache through a store outage', () => {
  it('keeps known keys past their TTL while the store is unreachable, fails unknown ones, honours invalidations', async () => {
    const [deviceId] = await registerDevices(direct.store, {
      relay: 'http://127.0.0.1:1',
      count: 1,
      publicKey: 'MFkw-test-key',
      namePrefix: 'outage-',
    });
    const known = await createKey(direct.store, deviceId);
    const other = await createKey(direct.store, deviceId);
    const unknown = await createKey(direct.store, deviceId);
    let storeUp = true;
    // The store as the node has it, counting the key lookups it is asked for.
    let lookups = 0;
    const store = new Proxy(proxied.store, {
      get(target, key) {
        const value: unknown = Reflect.get(target, key, target);
        if (typeof value !== 'function') return value;
        if (key === 'findTokenByHash') lookups++;
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
    const auth = new Authenticator(store, { storeUp: () => storeUp, ttlMs: 300 });
    expect((await auth.authenticate(known.token))?.token.id).toBe(known.id);
    expect((await auth.authenticate(other.token))?.token.id).toBe(other.id);

    await proxy.setEnabled(false); // Postgres gone for the node: connections closed, new ones refused
    try {
      await sleep(400); // past the TTL
      // The node has not noticed yet: the store is asked, fails, and the known key stands.
      expect((await auth.authenticate(known.token))?.token.id).toBe(known.id);
      // The node knows the store is down: answered from the cache without asking.
      const asked = lookups;
      expect(asked).toBeGreaterThan(0);
      storeUp = false;
      expect((await auth.authenticate(known.token))?.token.id).toBe(known.id);
      expect(lookups).toBe(asked);
      // A key it never checked cannot be vouched for.
      await expect(auth.authenticate(unknown.token)).rejects.toThrow();
      // An invalidation that reaches the node (the bus) still ends a key at once.
      auth.invalidate({ tokenId: other.id });
      await expect(auth.authenticate(other.token)).rejects.toThrow();
    } finally {
      await proxy.setEnabled(true);
    }
    storeUp = true;
    // Back: the store is asked again, and answers.
    expect((await auth.authenticate(unknown.token))?.token.id).toBe(unknown.id);
    expect((await auth.authenticate(other.token))?.token.id).toBe(other.id);
  }, 30_000);
});
