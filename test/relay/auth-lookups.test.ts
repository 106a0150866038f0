// One store lookup per key at a time (src/gateway/auth.ts): when a busy key's cache entry lapses,
// the calls in flight for it share one answer instead of each asking Postgres; a caller that
// comes after an invalidation never shares a lookup that started before it. A real Postgres
// store, its lookups counted and held where the test needs them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authenticator } from '../../src/gateway/auth.ts';
import { createKey, registerDevices } from '../../src/provisioning.ts';
import { openStore, type OpenStore } from '../../src/store/index.ts';
import type { Store } from '../../src/store/types.ts';
import { createDatabase } from '../cluster/harness.ts';

let db: Awaited<ReturnType<typeof createDatabase>>;
let open: OpenStore;
let dir: string;
let deviceId: string;

beforeAll(async () => {
  db = await createDatabase();
  dir = mkdtempSync(join(tmpdir(), 'pb-auth-lookups-'));
  open = await openStore({ dataDir: dir, databaseUrl: db.url, role: 'cli' });
  [deviceId] = await registerDevices(open.store, {
    relay: 'http://127.0.0.1:1',
    count: 1,
    publicKey: 'MFkw-test-key',
    namePrefix: 'lookups-',
  });
}, 60_000);
afterAll(async () => {
  await open?.close().catch(() => {});
  await db?.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** The real store, its key lookups counted; the first one held until release() when `hold`. */
function countingStore(store: Store, hold = false) {
  let lookups = 0;
  let release!: () => void;
  let reached!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const atGate = new Promise<void>((r) => (reached = r));
  const counted = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'findTokenByHash')
        return async (...args: Parameters<Store['findTokenByHash']>) => {
          const first = lookups++ === 0;
          const t = await target.findTokenByHash(...args);
          if (first && hold) {
            reached();
            await gate;
          }
          return t;
        };
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { store: counted, lookups: () => lookups, release, atGate };
}

describe('credential lookups', () => {
  it('32 calls for a key not in the cache ask the store once and all get the credential', async () => {
    const key = await createKey(open.store, deviceId);
    const s = countingStore(open.store);
    const auth = new Authenticator(s.store);
    const answers = await Promise.all(Array.from({ length: 32 }, () => auth.authenticate(key.token)));
    expect(answers.map((a) => a?.token.id)).toEqual(Array(32).fill(key.id));
    expect(s.lookups()).toBe(1);
    // Cached now: no further lookup.
    expect((await auth.authenticate(key.token))?.token.id).toBe(key.id);
    expect(s.lookups()).toBe(1);
  });

  it('a lapsed entry is looked up once for all the calls that find it lapsed', async () => {
    const key = await createKey(open.store, deviceId);
    const s = countingStore(open.store);
    const auth = new Authenticator(s.store, { ttlMs: 1 });
    await auth.authenticate(key.token);
    await new Promise((r) => setTimeout(r, 5));
    await Promise.all(Array.from({ length: 16 }, () => auth.authenticate(key.token)));
    expect(s.lookups()).toBe(2);
  });

  it('a caller after an invalidation does not share the lookup that started before it', async () => {
    const key = await createKey(open.store, deviceId);
    const s = countingStore(open.store, true);
    const auth = new Authenticator(s.store);
    const before = auth.authenticate(key.token);
    const joined = auth.authenticate(key.token); // same generation: shares the held lookup
    await s.atGate; // the store read the key as valid
    expect(await open.store.revokeToken(key.id)).toBe(true);
    auth.invalidate({ tokenId: key.id });
    const after = auth.authenticate(key.token); // must ask the store itself
    expect(await after).toBeUndefined();
    s.release();
    // The held lookup saw the invalidation and asked again: refused too, and nothing cached.
    expect(await before).toBeUndefined();
    expect(await joined).toBeUndefined();
    expect(s.lookups()).toBe(3);
    expect(auth.cached(key.token)).toBeUndefined();
  });
});
