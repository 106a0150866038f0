// Hundreds of phones of one enrollment code pairing at once, on real Postgres through a small
// pool: the code's row lock is held only while a statement runs, never while a transaction
// waits for its client (docs/decisions/0176-enrollment-in-one-statement.md). Held across round
// trips, every pairing queues on that lock while holding a pool connection, and a relay's pool
// runs dry (connection timeouts, 503 store_unavailable) long before a rack is enrolled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { postgresBackend, type TestBackend } from '../../src/store/test-support.ts';
import { createStore } from '../../src/store/kysely-store.ts';
import type { DatabaseSource, Store } from '../../src/store/index.ts';
import { createEnrollment } from '../../src/fleet/enroll.ts';
import { hashPairingCode, newId } from '../../src/crypto/secrets.ts';

const PHONES = 250;
const MAX = 220;

let backend: TestBackend;
let source: DatabaseSource;
let store: Store;
let monitor: pg.Client;

beforeAll(async () => {
  backend = postgresBackend();
  source = await backend.open();
  store = await createStore(source, { poolMax: 4 });
  await store.ensureAccount('local');
  monitor = new pg.Client(source.pgConfig);
  await monitor.connect();
}, 60_000);

afterAll(async () => {
  await monitor?.end().catch(() => {});
  await store?.close().catch(() => {});
  await source?.close().catch(() => {});
  await backend?.cleanup().catch(() => {});
});

/**
 * Backends of this database waiting for a lock that a backend idle in a transaction holds:
 * a lock kept across a round trip to the relay (pg_blocking_pids, pg_stat_activity).
 */
async function waitsOnIdleHolders(): Promise<number> {
  const { rows } = await monitor.query<{ n: string }>(
    `select count(*) n
       from pg_stat_activity w
       join pg_stat_activity h on h.pid = any (pg_blocking_pids(w.pid))
      where w.datname = current_database() and h.state like 'idle in transaction%'`,
  );
  return Number(rows[0].n);
}

describe('an enrollment code under 250 concurrent pairings (pool of 4)', () => {
  it('hands out exactly max_phones slots, named in order, and never holds its lock across a round trip', async () => {
    const e = await createEnrollment(store, {
      accountId: 'local',
      maxPhones: MAX,
      expiresMs: 3600_000,
      labels: { site: 'berlin' },
      namePrefix: 'rack-',
      relay: 'http://relay.test',
    });
    const codeHash = hashPairingCode(e.code);
    let sampling = true;
    let samples = 0;
    let idleHolderWaits = 0;
    const sampler = (async () => {
      // Bounded: the pairings end within the test's timeout, and so does this loop.
      while (sampling && samples < 10_000) {
        idleHolderWaits += await waitsOnIdleHolders();
        samples++;
      }
    })();
    const results = await Promise.all(
      // A key each: one key is one phone, whose repeats get its device
      // (docs/decisions/0238-a-pairing-repeated-by-its-phone.md).
      Array.from({ length: PHONES }, (_, i) =>
        store.redeemPairingCode({
          codeHash,
          deviceId: newId('dev'),
          publicKey: `PUB-${i}`,
          name: 'phone',
          now: new Date(),
        }),
      ),
    ).finally(() => (sampling = false));
    await sampler;

    const ok = results.filter((r) => r.ok);
    expect(ok).toHaveLength(MAX);
    expect(results.filter((r) => !r.ok).map((r) => !r.ok && r.error)).toEqual(Array(PHONES - MAX).fill('bad_code'));
    expect(new Set(ok.map((r) => r.ok && r.device.name))).toEqual(
      new Set(Array.from({ length: MAX }, (_, i) => `rack-${i + 1}`)),
    );
    expect((await store.fleet.getEnrollment(e.id))?.used).toBe(MAX);
    const devices = await store.fleet.listDevices({ accountId: 'local', contains: { site: 'berlin' } });
    expect(devices).toHaveLength(MAX);

    expect(samples).toBeGreaterThan(0);
    expect(idleHolderWaits).toBe(0);
  }, 120_000);

  it('still keeps a capped account to its cap and keeps the slot of a refused phone', async () => {
    await store.ensureAccount('capped', { maxDevices: 30 });
    const e = await createEnrollment(store, {
      accountId: 'capped',
      maxPhones: 100,
      expiresMs: 3600_000,
      relay: 'http://relay.test',
    });
    const codeHash = hashPairingCode(e.code);
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        store.redeemPairingCode({
          codeHash,
          deviceId: newId('dev'),
          publicKey: `PUB-${i}`,
          name: 'p',
          now: new Date(),
        }),
      ),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(30);
    expect(results.filter((r) => !r.ok && r.error === 'limit_reached')).toHaveLength(30);
    expect((await store.fleet.getEnrollment(e.id))?.used).toBe(30);
  }, 60_000);
});
