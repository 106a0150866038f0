// The store behaviour suite, run once per backend (store.embedded.test.ts, store.postgres.test.ts).
import { Kysely, PostgresDialect, sql } from './kysely.ts';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPairingCode, newApiToken, newPairingCode, sha256Hex } from '../crypto/secrets.ts';
import type { DatabaseSource } from './database/types.ts';
import { createStore, LATEST_SCHEMA_VERSION, migrate, openStore, type MigrateResult } from './index.ts';
import { MIGRATIONS, type Migration } from './migrations/index.ts';
import { migration006 } from './migrations/006_removed_devices.ts';
import { migration008 } from './migrations/008_device_enrollment_unique.ts';
import { migration009 } from './migrations/009_grant_last_token.ts';
import { uid, type TestBackend } from './test-support.ts';
import {
  LOCAL_ACCOUNT_ID,
  REMOVED_DEVICE_RETENTION_MS,
  SchemaTooNewError,
  SCOPES,
  type Scope,
  type Store,
} from './types.ts';

const MIN = 60_000;

export function storeSuite(backend: TestBackend): void {
  describe(`store on ${backend.name}`, () => {
    let source: DatabaseSource;
    let store: Store;
    /** A second store with its own pool: separate connections (separate sessions on Postgres). */
    let other: Store;
    let raw: pg.Pool;
    let firstMigrations: MigrateResult[];
    /** Set when a test has already closed the suite's store, pools and source. */
    let closed = false;

    const kyselyOn = (max = 2) =>
      new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ ...source.pgConfig, max }) }) });

    /** Marks the schema as the release before `m` left it, then migrates it to the latest. */
    async function migrateFromBefore(m: Migration): Promise<void> {
      const before = MIGRATIONS[m.version - 2];
      await raw.query('update schema_version set version = $1, min_release = $2', [before.version, before.release]);
      const k = kyselyOn();
      try {
        expect(await migrate(k)).toEqual({ from: before.version, to: LATEST_SCHEMA_VERSION });
      } finally {
        await k.destroy();
      }
    }

    beforeAll(async () => {
      source = await backend.open();
      raw = new pg.Pool({ ...source.pgConfig, max: 2 });
      raw.on('error', () => {});
      // The very first migration of an empty database, by two migrators at once.
      const a = kyselyOn();
      const b = kyselyOn();
      try {
        firstMigrations = await Promise.all([migrate(a), migrate(b)]);
      } finally {
        await Promise.all([a.destroy(), b.destroy()]);
      }
      store = await createStore(source);
      other = await createStore(source);
      await store.ensureAccount(LOCAL_ACCOUNT_ID);
    });

    afterAll(async () => {
      if (!closed) {
        await other?.close();
        await store?.close();
        await raw?.end();
        await source?.close();
      }
      await backend.cleanup();
    });

    /** An account of its own per test, so tests do not see each other's rows. */
    const account = (limits?: { maxDevices?: number | null; maxKeys?: number | null }) =>
      store.ensureAccount(uid('acct'), limits);

    async function pairedDevice(accountId: string, s: Store = store) {
      const code = newPairingCode();
      expect(
        await s.createPairingCode({
          accountId,
          codeHash: hashPairingCode(code),
          expiresAt: new Date(Date.now() + 10 * MIN),
        }),
      ).toEqual({ ok: true });
      const r = await s.redeemPairingCode({
        codeHash: hashPairingCode(code),
        deviceId: uid('dev'),
        publicKey: 'pk',
        name: 'phone',
        now: new Date(),
      });
      if (!r.ok) throw new Error(`redeem failed: ${r.error}`);
      return r.device;
    }

    async function newToken(
      accountId: string,
      deviceId: string,
      extra: { expiresAt?: Date | null; via?: 'key' | 'oauth'; scopes?: Scope[] } = {},
    ) {
      const secret = newApiToken();
      const r = await store.createToken({
        id: uid('tok'),
        accountId,
        deviceId,
        hash: sha256Hex(secret),
        scopes: extra.scopes ?? [...SCOPES],
        via: extra.via ?? 'key',
        expiresAt: extra.expiresAt,
      });
      return { r, secret };
    }

    describe('schema', () => {
      it('migrates an empty database once, even with two migrators racing', async () => {
        expect(firstMigrations.map((m) => m.from).sort()).toEqual([0, LATEST_SCHEMA_VERSION]);
        expect(firstMigrations.every((m) => m.to === LATEST_SCHEMA_VERSION)).toBe(true);
        const { rows } = await raw.query('select version from schema_version');
        expect(rows).toEqual([{ version: LATEST_SCHEMA_VERSION }]);
        const tables = await raw.query(
          `select table_name from information_schema.tables where table_schema = 'public' order by 1`,
        );
        // Later migrations add tables; these are the ones 001 must have made.
        expect(tables.rows.map((r) => r.table_name)).toEqual(
          expect.arrayContaining(['accounts', 'devices', 'pairing_codes', 'schema_version', 'tokens']),
        );
        expect(store.schemaVersion).toBe(LATEST_SCHEMA_VERSION);
      });

      it('reopening is a no-op and keeps the data', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const k = kyselyOn();
        try {
          expect(await migrate(k)).toEqual({ from: LATEST_SCHEMA_VERSION, to: LATEST_SCHEMA_VERSION });
        } finally {
          await k.destroy();
        }
        expect((await raw.query('select count(*)::int as n from schema_version')).rows[0].n).toBe(1);
        expect(await store.getDevice(dev.id)).toMatchObject({ id: dev.id, accountId: acct.id });
      });

      it('a newer build migrates the schema; an older build then refuses it with SchemaTooNewError', async () => {
        const next: Migration = {
          version: LATEST_SCHEMA_VERSION + 1,
          name: 'test_future',
          release: '99.1.0',
          up: async (db) => {
            await sql`create table future_thing (id text primary key)`.execute(db);
          },
        };
        const k = kyselyOn();
        try {
          expect(await migrate(k, [...MIGRATIONS, next])).toEqual({
            from: LATEST_SCHEMA_VERSION,
            to: LATEST_SCHEMA_VERSION + 1,
          });
          const err = await migrate(k).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(SchemaTooNewError);
          expect(err).toMatchObject({
            found: LATEST_SCHEMA_VERSION + 1,
            supported: LATEST_SCHEMA_VERSION,
            needs: '99.1.0',
          });
          // The message says which release the schema needs.
          expect((err as Error).message).toContain('it needs phonebridge 99.1.0 or newer');
          await expect(createStore(source)).rejects.toBeInstanceOf(SchemaTooNewError);
          // The entry point the CLI uses fails the same way (and the refusal changed nothing).
          const opts =
            backend.name === 'embedded'
              ? { ...backend.reopenOptions(), role: 'cli' as const }
              : backend.reopenOptions();
          await expect(openStore(opts)).rejects.toBeInstanceOf(SchemaTooNewError);
          expect((await raw.query('select version, min_release from schema_version')).rows).toEqual([
            { version: LATEST_SCHEMA_VERSION + 1, min_release: '99.1.0' },
          ]);
        } finally {
          await raw.query('drop table if exists future_thing');
          await raw.query('update schema_version set version = $1, min_release = $2', [
            LATEST_SCHEMA_VERSION,
            MIGRATIONS[MIGRATIONS.length - 1].release,
          ]);
          await k.destroy();
        }
      });

      it('records the oldest release the schema needs, also on a schema an older runner made', async () => {
        const latestRelease = MIGRATIONS[MIGRATIONS.length - 1].release;
        expect((await raw.query('select min_release from schema_version')).rows).toEqual([
          { min_release: latestRelease },
        ]);
        // What the runner before this column left (fe50efd): the table without it.
        await raw.query('alter table schema_version drop column min_release');
        const k = kyselyOn();
        try {
          expect(await migrate(k)).toEqual({ from: LATEST_SCHEMA_VERSION, to: LATEST_SCHEMA_VERSION });
        } finally {
          await k.destroy();
        }
        expect((await raw.query('select version, min_release from schema_version')).rows).toEqual([
          { version: LATEST_SCHEMA_VERSION, min_release: latestRelease },
        ]);
      });

      it('migrations 006 and 007 bring a database at version 5 to removed_devices and enrollment_id, its devices kept', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        // The schema as version 5 left it: no removed_devices, no devices.enrollment_id (nor its
        // indexes), no oauth_grants.last_token_at (009).
        await raw.query('drop table removed_devices');
        await raw.query('alter table devices drop column enrollment_id');
        await raw.query('alter table oauth_grants drop column last_token_at');
        await migrateFromBefore(migration006);
        expect((await raw.query('select version, min_release from schema_version')).rows).toEqual([
          { version: LATEST_SCHEMA_VERSION, min_release: MIGRATIONS[MIGRATIONS.length - 1].release },
        ]);
        expect(await store.getDevice(dev.id)).toMatchObject({ id: dev.id, accountId: acct.id });
        // A removal after the upgrade is remembered.
        expect(await store.removeDevice(dev.id)).toBe(true);
        expect((await store.getRemovedDevices([dev.id])).get(dev.id)).toMatchObject({ accountId: acct.id });
      });

      it('migration 008 keeps twin phones of one enrollment key as devices, the oldest linked, and refuses new twins', async () => {
        const acct = await account();
        const [older, newer, other] = [
          await pairedDevice(acct.id),
          await pairedDevice(acct.id),
          await pairedDevice(acct.id),
        ];
        const enrollmentId = uid('enr');
        // The schema as version 7 left it, holding twins two racing pairings could make there.
        await raw.query('drop index devices_enrollment_key_unique');
        await raw.query('alter table oauth_grants drop column last_token_at');
        await raw.query(`update devices set enrollment_id = $1, public_key = 'TWIN', created_at = $2 where id = $3`, [
          enrollmentId,
          new Date(Date.now() - 60_000),
          older.id,
        ]);
        await raw.query(`update devices set enrollment_id = $1, public_key = 'TWIN' where id = $2`, [
          enrollmentId,
          newer.id,
        ]);
        await raw.query(`update devices set enrollment_id = $1 where id = $2`, [enrollmentId, other.id]);
        await migrateFromBefore(migration008);
        const linked = await raw.query('select id, enrollment_id from devices where id = any($1) order by id', [
          [older.id, newer.id, other.id],
        ]);
        expect(Object.fromEntries(linked.rows.map((r) => [r.id, r.enrollment_id]))).toEqual({
          [older.id]: enrollmentId,
          [newer.id]: null,
          [other.id]: enrollmentId,
        });
        await expect(
          raw.query(`update devices set enrollment_id = $1, public_key = 'TWIN' where id = $2`, [
            enrollmentId,
            newer.id,
          ]),
        ).rejects.toThrow(/devices_enrollment_key_unique/);
      });

      it('migration 009 gives a grant the mint time of its newest token; one without tokens left reads none', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const client = await store.hosted.registerOAuthClient({
          id: uid('cli'),
          name: 'Old client',
          redirectUris: ['http://127.0.0.1:9/cb'],
        });
        const grant = async (grantId: string) => {
          const now = Date.now();
          await store.hosted.issueOAuthGrant({
            grantId,
            accountId: acct.id,
            clientId: client.id,
            deviceId: dev.id,
            scopes: ['devices:read'],
            access: { id: uid('oat'), hash: sha256Hex(uid('a')), expiresAt: new Date(now + 60 * MIN) },
            refresh: { hash: sha256Hex(uid('r')), expiresAt: new Date(now + 30 * 24 * 60 * MIN) },
          });
        };
        const [kept, purged] = [uid('grant'), uid('grant')];
        await grant(kept);
        await grant(purged);
        const minted = new Date(Date.now() - 5 * MIN);
        await raw.query('update tokens set created_at = $2 where grant_id = $1', [kept, minted]);
        await raw.query('delete from tokens where grant_id = $1', [purged]);
        // The schema as version 8 left it: no oauth_grants.last_token_at.
        await raw.query('alter table oauth_grants drop column last_token_at');
        await migrateFromBefore(migration009);
        const last = new Map((await store.hosted.listOAuthGrants(acct.id)).map((g) => [g.id, g.lastUsedAt]));
        expect(last).toEqual(
          new Map<string, Date | null>([
            [kept, minted],
            [purged, null],
          ]),
        );
      });
    });

    describe('accounts', () => {
      it('the local account exists and is unlimited; ensureAccount is idempotent', async () => {
        expect(await store.getAccount(LOCAL_ACCOUNT_ID)).toMatchObject({
          id: LOCAL_ACCOUNT_ID,
          maxDevices: null,
          maxKeys: null,
          locked: false,
        });
        const id = uid('acct');
        const a1 = await store.ensureAccount(id, { maxDevices: 2, maxKeys: 3 });
        const a2 = await store.ensureAccount(id, { maxDevices: 2, maxKeys: 3 });
        expect(a2).toEqual(a1);
        expect(await store.ensureAccount(id)).toEqual(a1); // no limits given: untouched
        expect(await store.ensureAccount(id, { maxKeys: null })).toMatchObject({ maxDevices: 2, maxKeys: null });
        await store.setAccountLocked(id, true);
        expect((await store.getAccount(id))?.locked).toBe(true);
        expect(await store.getAccount(uid('nope'))).toBeUndefined();
      });
    });

    describe('pairing', () => {
      it('redeems a valid code once, then treats it as bad', async () => {
        const acct = await account();
        const code = newPairingCode();
        const codeHash = hashPairingCode(code);
        await store.createPairingCode({
          accountId: acct.id,
          codeHash,
          expiresAt: new Date(Date.now() + 10 * MIN),
          name: 'Pixel',
        });
        const now = new Date();
        const r = await store.redeemPairingCode({
          codeHash,
          deviceId: uid('dev'),
          publicKey: 'PUB',
          name: 'phone-says',
          now,
        });
        expect(r.ok).toBe(true);
        if (!r.ok) return;
        expect(r.device).toMatchObject({
          accountId: acct.id,
          name: 'Pixel',
          publicKey: 'PUB',
          initResult: null,
          lastSeenAt: null,
        });
        expect(await store.getDevice(r.device.id)).toEqual(r.device);
        expect(await store.listDevices(acct.id)).toEqual([r.device]);
        // used: by another key it is bad_code
        expect(
          await store.redeemPairingCode({ codeHash, deviceId: uid('dev'), publicKey: 'OTHER', name: 'x', now }),
        ).toEqual({ ok: false, error: 'bad_code' });
        expect(await store.listDevices(acct.id)).toHaveLength(1);
      });

      it('answers the phone that used a code, asking again with its key, with its device; nothing new', async () => {
        const acct = await account();
        const codeHash = hashPairingCode(newPairingCode());
        const expiresAt = new Date(Date.now() + 10 * MIN);
        await store.createPairingCode({ accountId: acct.id, codeHash, expiresAt });
        const first = await store.redeemPairingCode({
          codeHash,
          deviceId: uid('dev'),
          publicKey: 'PUB-A',
          name: 'a',
          now: new Date(),
        });
        if (!first.ok) throw new Error('first pairing refused');
        expect(first.repeated).toBeUndefined();
        const again = (now: Date, publicKey = 'PUB-A') =>
          store.redeemPairingCode({ codeHash, deviceId: uid('dev'), publicKey, name: 'b', now });
        expect(await again(new Date())).toEqual({ ok: true, device: first.device, repeated: true });
        expect(await again(new Date(expiresAt.getTime() - 1))).toEqual({
          ok: true,
          device: first.device,
          repeated: true,
        });
        expect(await store.listDevices(acct.id)).toEqual([first.device]);
        // Not after the code's expiry, not for another key, not once the device is removed.
        expect(await again(expiresAt)).toEqual({ ok: false, error: 'bad_code' });
        expect(await again(new Date(), 'PUB-B')).toEqual({ ok: false, error: 'bad_code' });
        // A purge before expiry keeps the used code (its phone may still ask again).
        await store.purgeExpired(new Date());
        expect((await again(new Date())).ok).toBe(true);
        expect(await store.removeDevice(first.device.id)).toBe(true);
        expect(await again(new Date())).toEqual({ ok: false, error: 'bad_code' });
        expect(await store.listDevices(acct.id)).toEqual([]);
      });

      /** An enrollment code of `accountId` for `maxPhones` phones named r-1, r-2, …, valid an hour. */
      async function rackCode(accountId: string, maxPhones: number) {
        const codeHash = hashPairingCode(newPairingCode());
        const e = await store.fleet.createEnrollment({
          id: uid('enr'),
          accountId,
          codeHash,
          maxPhones,
          labels: { rack: 'a' },
          namePrefix: 'r-',
          expiresAt: new Date(Date.now() + 60 * MIN),
        });
        return { e, codeHash };
      }

      it.each([
        ['an uncapped account', null],
        ['a capped account', 10],
      ])(
        "answers an enrollment code's phone asking again with its key with its device, taking no slot (%s)",
        async (_, maxDevices) => {
          const acct = await account({ maxDevices });
          const { e, codeHash } = await rackCode(acct.id, 2);
          const pair = (publicKey: string) =>
            store.redeemPairingCode({ codeHash, deviceId: uid('dev'), publicKey, name: 'p', now: new Date() });
          const a = await pair('KEY-A');
          if (!a.ok) throw new Error('first pairing refused');
          expect(a.repeated).toBeUndefined();
          expect(await pair('KEY-A')).toEqual({ ok: true, device: a.device, repeated: true });
          expect((await store.fleet.getEnrollment(e.id))?.used).toBe(1);
          const b = await pair('KEY-B');
          expect(b).toMatchObject({ ok: true, device: { name: 'r-2' } });
          // Used up: a new key is refused, the phones it paired still get their devices.
          expect(await pair('KEY-C')).toEqual({ ok: false, error: 'bad_code' });
          expect(await pair('KEY-A')).toEqual({ ok: true, device: a.device, repeated: true });
          expect((await store.fleet.getEnrollment(e.id))?.used).toBe(2);
          expect((await store.listDevices(acct.id)).map((d) => d.name).sort()).toEqual(['r-1', 'r-2']);
          // Revoked: nothing, not even a repeat.
          expect(await store.fleet.revokeEnrollment(e.id, new Date())).toBe(true);
          expect(await pair('KEY-A')).toEqual({ ok: false, error: 'bad_code' });
        },
      );

      it.each([
        ['an uncapped account', 'one phone', null, 1],
        ['an uncapped account', '100 phones', null, 100],
        ['a capped account', 'one phone', 10, 1],
        ['a capped account', '100 phones', 10, 100],
      ])(
        "answers an enrollment code's phone asking several times at once with one device and one slot (%s, a code for %s)",
        async (_account, _code, maxDevices, maxPhones) => {
          const acct = await account({ maxDevices });
          const { e, codeHash } = await rackCode(acct.id, maxPhones);
          const results = await Promise.all(
            Array.from({ length: 8 }, () =>
              store.redeemPairingCode({
                codeHash,
                deviceId: uid('dev'),
                publicKey: 'KEY-A',
                name: 'p',
                now: new Date(),
              }),
            ),
          );
          const devices = await store.listDevices(acct.id);
          expect(devices).toHaveLength(1);
          for (const r of results) expect(r).toMatchObject({ ok: true, device: devices[0] });
          expect(results.filter((r) => r.ok && !r.repeated)).toHaveLength(1);
          expect((await store.fleet.getEnrollment(e.id))?.used).toBe(1);
        },
      );

      it('wrong and expired codes are bad_code', async () => {
        const acct = await account();
        const codeHash = hashPairingCode(newPairingCode());
        const expiresAt = new Date(Date.now() + 10 * MIN);
        await store.createPairingCode({ accountId: acct.id, codeHash, expiresAt });
        const base = { deviceId: uid('dev'), publicKey: 'PUB', name: 'phone' };
        expect(
          await store.redeemPairingCode({ ...base, codeHash: hashPairingCode(newPairingCode()), now: new Date() }),
        ).toEqual({ ok: false, error: 'bad_code' });
        expect(await store.redeemPairingCode({ ...base, codeHash, now: expiresAt })).toEqual({
          ok: false,
          error: 'bad_code',
        });
        expect(await store.redeemPairingCode({ ...base, codeHash, now: new Date(expiresAt.getTime() + 1) })).toEqual({
          ok: false,
          error: 'bad_code',
        });
        expect(await store.listDevices(acct.id)).toEqual([]);
        // Still good before expiry: the failures above consumed nothing.
        expect((await store.redeemPairingCode({ ...base, codeHash, now: new Date(expiresAt.getTime() - 1) })).ok).toBe(
          true,
        );
      });

      it('the device cap is enforced when a code is created', async () => {
        const acct = await account({ maxDevices: 1 });
        await pairedDevice(acct.id);
        expect(
          await store.createPairingCode({
            accountId: acct.id,
            codeHash: hashPairingCode(newPairingCode()),
            expiresAt: new Date(Date.now() + MIN),
          }),
        ).toEqual({ ok: false, error: 'limit_reached' });
        const zero = await account({ maxDevices: 0 });
        expect(
          await store.createPairingCode({
            accountId: zero.id,
            codeHash: hashPairingCode(newPairingCode()),
            expiresAt: new Date(Date.now() + MIN),
          }),
        ).toEqual({ ok: false, error: 'limit_reached' });
      });

      it('the device cap is enforced again at redemption, leaving the code usable', async () => {
        const acct = await account({ maxDevices: 1 });
        const [c1, c2] = [hashPairingCode(newPairingCode()), hashPairingCode(newPairingCode())];
        const expiresAt = new Date(Date.now() + 10 * MIN);
        await store.createPairingCode({ accountId: acct.id, codeHash: c1, expiresAt });
        await store.createPairingCode({ accountId: acct.id, codeHash: c2, expiresAt });
        const first = await store.redeemPairingCode({
          codeHash: c1,
          deviceId: uid('dev'),
          publicKey: 'a',
          name: 'a',
          now: new Date(),
        });
        expect(first.ok).toBe(true);
        expect(
          await store.redeemPairingCode({
            codeHash: c2,
            deviceId: uid('dev'),
            publicKey: 'b',
            name: 'b',
            now: new Date(),
          }),
        ).toEqual({ ok: false, error: 'limit_reached' });
        // Free the slot; the same code now works.
        if (first.ok) expect(await store.removeDevice(first.device.id)).toBe(true);
        expect(
          (
            await store.redeemPairingCode({
              codeHash: c2,
              deviceId: uid('dev'),
              publicKey: 'b',
              name: 'b',
              now: new Date(),
            })
          ).ok,
        ).toBe(true);
      });

      it('two concurrent redemptions of one code: exactly one wins', async () => {
        const acct = await account();
        const codeHash = hashPairingCode(newPairingCode());
        await store.createPairingCode({ accountId: acct.id, codeHash, expiresAt: new Date(Date.now() + 10 * MIN) });
        const attempts = Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? other : store).redeemPairingCode({
            codeHash,
            deviceId: uid('dev'),
            publicKey: `pk${i}`,
            name: `p${i}`,
            now: new Date(),
          }),
        );
        const results = await Promise.all(attempts);
        expect(results.filter((r) => r.ok)).toHaveLength(1);
        expect(results.filter((r) => !r.ok).map((r) => !r.ok && r.error)).toEqual(Array(7).fill('bad_code'));
        expect(await store.listDevices(acct.id)).toHaveLength(1);
      });

      it('concurrent redemptions of different codes cannot exceed the cap', async () => {
        const acct = await account({ maxDevices: 2 });
        const hashes = Array.from({ length: 6 }, () => hashPairingCode(newPairingCode()));
        for (const codeHash of hashes)
          await store.createPairingCode({ accountId: acct.id, codeHash, expiresAt: new Date(Date.now() + 10 * MIN) });
        const results = await Promise.all(
          hashes.map((codeHash, i) =>
            (i % 2 ? other : store).redeemPairingCode({
              codeHash,
              deviceId: uid('dev'),
              publicKey: 'pk',
              name: 'p',
              now: new Date(),
            }),
          ),
        );
        expect(results.filter((r) => r.ok)).toHaveLength(2);
        expect(results.filter((r) => !r.ok && r.error === 'limit_reached')).toHaveLength(4);
        expect(await store.listDevices(acct.id)).toHaveLength(2);
      });
    });

    describe('devices', () => {
      it('stores the init result as JSON and the last-seen time', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const init = {
          protocolVersion: '2025-06-18',
          capabilities: { tools: { listChanged: true } },
          list: [1, 'two', null],
        };
        const seen = new Date('2026-01-02T03:04:05.678Z');
        await store.saveDeviceInitResult(dev.id, init, seen);
        expect(await store.getDevice(dev.id)).toMatchObject({ initResult: init, lastSeenAt: seen });
        // An array at top level must stay JSON, not become a Postgres array.
        await store.saveDeviceInitResult(dev.id, ['a', 1], seen);
        expect((await store.getDevice(dev.id))?.initResult).toEqual(['a', 1]);
        const later = new Date(seen.getTime() + 1000);
        await store.touchDevice(dev.id, later);
        expect(await store.getDevice(dev.id)).toMatchObject({ initResult: ['a', 1], lastSeenAt: later });
        expect(await store.getDevice(uid('nope'))).toBeUndefined();
      });

      it("looks up many devices' keys in one call; unknown ids are absent", async () => {
        const acct = await account();
        const a = await pairedDevice(acct.id);
        const b = await pairedDevice(acct.id);
        const keys = await store.getDeviceKeys([a.id, uid('nope'), b.id, a.id]);
        expect([...keys.keys()].sort()).toEqual([a.id, b.id].sort());
        expect(keys.get(a.id)).toEqual({ accountId: acct.id, publicKey: a.publicKey });
        expect((await store.getDeviceKeys([])).size).toBe(0);
      });

      it('remembers a removed device: its id, account, public key and when, nothing else', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const live = await pairedDevice(acct.id);
        expect((await store.getRemovedDevices([dev.id, live.id])).size).toBe(0);
        const t0 = Date.now();
        expect(await store.removeDevice(dev.id)).toBe(true);
        // Another store (another node or the CLI) reads it; live and unknown ids are absent.
        const got = await other.getRemovedDevices([dev.id, live.id, uid('nope'), dev.id]);
        expect([...got.keys()]).toEqual([dev.id]);
        const removed = got.get(dev.id)!;
        expect(removed).toEqual({ accountId: acct.id, publicKey: dev.publicKey, removedAt: expect.any(Date) });
        // The database's clock wrote it: within a minute of this process's.
        expect(Math.abs(removed.removedAt.getTime() - t0)).toBeLessThan(MIN);
        expect((await store.getDeviceKeys([dev.id])).size).toBe(0);
        // A second removal finds nothing and changes nothing.
        expect(await store.removeDevice(dev.id)).toBe(false);
        expect((await store.getRemovedDevices([dev.id])).get(dev.id)).toEqual(removed);
        expect((await store.getRemovedDevices([])).size).toBe(0);
        const columns = await raw.query(
          `select column_name from information_schema.columns where table_name = 'removed_devices' order by 1`,
        );
        expect(columns.rows.map((r) => r.column_name)).toEqual(['account_id', 'id', 'public_key', 'removed_at']);
      });

      it('records many devices seen in one call: latest time wins, never moves back, init kept unless given', async () => {
        const acct = await account();
        const a = await pairedDevice(acct.id);
        const b = await pairedDevice(acct.id);
        const t0 = new Date('2026-01-02T03:04:05.000Z');
        const t1 = new Date(t0.getTime() + 1000);
        const t2 = new Date(t0.getTime() + 2000);
        await store.recordDevicesSeen([
          { id: a.id, seenAt: t1, initResult: { v: 1 } },
          { id: b.id, seenAt: t0, initResult: ['x'] },
          { id: a.id, seenAt: t0 }, // older touch for a: neither the time nor the init result change
          { id: uid('nope'), seenAt: t2 },
        ]);
        expect(await store.getDevice(a.id)).toMatchObject({ initResult: { v: 1 }, lastSeenAt: t1 });
        expect(await store.getDevice(b.id)).toMatchObject({ initResult: ['x'], lastSeenAt: t0 });
        await store.recordDevicesSeen([
          { id: a.id, seenAt: t0, initResult: null },
          { id: b.id, seenAt: t2 },
        ]);
        // a: the time stays at t1 (never back), the init result is cleared as given; b: init kept.
        expect(await store.getDevice(a.id)).toMatchObject({ initResult: null, lastSeenAt: t1 });
        expect(await store.getDevice(b.id)).toMatchObject({ initResult: ['x'], lastSeenAt: t2 });
        // One shared result object for two devices (as interned results are): both get it.
        const shared = { capabilities: { tools: {} }, serverInfo: { name: 'fleet', version: '2' } };
        await store.recordDevicesSeen([
          { id: a.id, seenAt: t2, initResult: shared },
          { id: b.id, seenAt: t2, initResult: shared },
        ]);
        expect((await store.getDevice(a.id))?.initResult).toEqual(shared);
        expect((await store.getDevice(b.id))?.initResult).toEqual(shared);
        await store.recordDevicesSeen([]);
      });

      it('lists by account', async () => {
        const a = await account();
        const b = await account();
        const d1 = await pairedDevice(a.id);
        const d2 = await pairedDevice(a.id);
        const d3 = await pairedDevice(b.id);
        expect((await store.listDevices(a.id)).map((d) => d.id).sort()).toEqual([d1.id, d2.id].sort());
        expect((await store.listDevices(b.id)).map((d) => d.id)).toEqual([d3.id]);
        const all = (await store.listDevices()).map((d) => d.id);
        expect(all).toEqual(expect.arrayContaining([d1.id, d2.id, d3.id]));
      });
    });

    describe('tokens', () => {
      it('finds a token by hash, only while unexpired', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const { r, secret } = await newToken(acct.id, dev.id, { scopes: ['devices:read', 'runs:start'] });
        expect(r.ok).toBe(true);
        if (!r.ok) return;
        expect(r.token).toMatchObject({
          accountId: acct.id,
          deviceId: dev.id,
          scopes: ['devices:read', 'runs:start'],
          via: 'key',
          expiresAt: null,
        });
        expect(await store.findTokenByHash(sha256Hex(secret), new Date())).toEqual(r.token);
        expect(await store.findTokenByHash(sha256Hex(newApiToken()), new Date())).toBeUndefined();

        const expiresAt = new Date(Date.now() + MIN);
        const t2 = await newToken(acct.id, dev.id, { via: 'oauth', expiresAt });
        expect(await store.findTokenByHash(sha256Hex(t2.secret), new Date(expiresAt.getTime() - 1))).toMatchObject({
          via: 'oauth',
          expiresAt,
        });
        expect(await store.findTokenByHash(sha256Hex(t2.secret), expiresAt)).toBeUndefined();
        expect((await store.listTokens({ deviceId: dev.id })).map((t) => t.via).sort()).toEqual(['key', 'oauth']);
      });

      it('refuses a device that does not exist or belongs to another account', async () => {
        const a = await account();
        const b = await account();
        const devB = await pairedDevice(b.id);
        expect((await newToken(a.id, devB.id)).r).toEqual({ ok: false, error: 'no_device' });
        expect((await newToken(a.id, uid('dev'))).r).toEqual({ ok: false, error: 'no_device' });
        expect((await newToken(uid('noacct'), devB.id)).r).toEqual({ ok: false, error: 'no_device' });
        expect(await store.listTokens({ accountId: a.id })).toEqual([]);
      });

      it('enforces the key cap on API keys (expired keys do not count, OAuth tokens are not keys)', async () => {
        const acct = await account({ maxKeys: 2 });
        const dev = await pairedDevice(acct.id);
        expect((await newToken(acct.id, dev.id, { expiresAt: new Date(Date.now() - 1000) })).r.ok).toBe(true);
        expect((await newToken(acct.id, dev.id)).r.ok).toBe(true);
        expect((await newToken(acct.id, dev.id)).r.ok).toBe(true);
        expect((await newToken(acct.id, dev.id)).r).toEqual({ ok: false, error: 'limit_reached' });
        expect((await newToken(acct.id, dev.id, { via: 'oauth', expiresAt: new Date(Date.now() + MIN) })).r.ok).toBe(
          true,
        );
      });

      it('a token dies with its device', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const keep = await pairedDevice(acct.id);
        const { secret } = await newToken(acct.id, dev.id);
        const kept = await newToken(acct.id, keep.id);
        expect(await store.findTokenByHash(sha256Hex(secret), new Date())).toBeDefined();
        expect(await store.removeDevice(dev.id)).toBe(true);
        expect(await store.findTokenByHash(sha256Hex(secret), new Date())).toBeUndefined();
        expect(await store.listTokens({ deviceId: dev.id })).toEqual([]);
        expect(await store.getDevice(dev.id)).toBeUndefined();
        expect(await store.removeDevice(dev.id)).toBe(false);
        expect(await store.findTokenByHash(sha256Hex(kept.secret), new Date())).toBeDefined();
      });

      it('revokes', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const { r, secret } = await newToken(acct.id, dev.id);
        if (!r.ok) throw new Error('create failed');
        expect(await store.revokeToken(r.token.id)).toBe(true);
        expect(await store.findTokenByHash(sha256Hex(secret), new Date())).toBeUndefined();
        expect(await store.revokeToken(r.token.id)).toBe(false);
      });
    });

    it('journals removals, revocations and plan locks for other processes to tail', async () => {
      const start = await other.controlEventsAfter(null);
      const acct = await account();
      const dev = await pairedDevice(acct.id);
      const { r } = await newToken(acct.id, dev.id);
      if (!r.ok) throw new Error('create failed');
      expect(await store.revokeToken(r.token.id)).toBe(true);
      expect(await store.revokeToken(r.token.id)).toBe(false); // nothing happened: nothing journaled
      await store.setAccountLocked(acct.id, true);
      expect(await store.removeDevice(dev.id)).toBe(true);
      // Another store (another process's view) sees exactly these, in order.
      const seen = await other.controlEventsAfter(start.lastId);
      expect(seen.events).toEqual([
        { type: 'token_revoked', tokenId: r.token.id },
        { type: 'credential_revoked', credential: r.token.id, deviceId: dev.id },
        { type: 'account_locked', accountId: acct.id, locked: true },
        { type: 'device_removed', deviceId: dev.id },
      ]);
      expect(await other.controlEventsAfter(seen.lastId)).toEqual({ lastId: seen.lastId, events: [] });
    });

    it('tails the journal once per event through an opaque cursor', async () => {
      const start = await other.tailControlEvents(null);
      expect(start.events).toEqual([]);
      const acct = await account();
      const dev = await pairedDevice(acct.id);
      const { r } = await newToken(acct.id, dev.id);
      if (!r.ok) throw new Error('create failed');
      await store.revokeToken(r.token.id);
      const seen = await other.tailControlEvents(start.cursor);
      expect(seen.events).toContainEqual({ type: 'token_revoked', tokenId: r.token.id });
      await store.setAccountLocked(acct.id, true);
      const next = await other.tailControlEvents(seen.cursor);
      expect(next.events).toContainEqual({ type: 'account_locked', accountId: acct.id, locked: true });
      expect(next.events).not.toContainEqual({ type: 'token_revoked', tokenId: r.token.id });
      expect((await other.tailControlEvents(next.cursor)).events).toEqual([]);
    });

    it('tails from two stores on one database, and past a server that dropped the prepared poll', async () => {
      // Each store prepares the poll under a name of its own: on embedded PGlite both share one
      // session, where one shared name would collide.
      let a = (await store.tailControlEvents(null)).cursor;
      let b = (await other.tailControlEvents(null)).cursor;
      for (let i = 0; i < 3; i++) {
        a = (await store.tailControlEvents(a)).cursor;
        b = (await other.tailControlEvents(b)).cursor;
      }
      // DEALLOCATE on a connection of its own: on embedded that is the stores' session too.
      await raw.query('DEALLOCATE ALL');
      const acct = await account();
      await store.setAccountLocked(acct.id, true);
      const seen = await store.tailControlEvents(a);
      expect(seen.events).toContainEqual({ type: 'account_locked', accountId: acct.id, locked: true });
      expect((await other.tailControlEvents(b)).events).toContainEqual({
        type: 'account_locked',
        accountId: acct.id,
        locked: true,
      });
      expect((await store.tailControlEvents(seen.cursor)).events).toEqual([]);
    });

    it('purges expired codes (used or not) and expired tokens', async () => {
      // Everything is relative to a fixed instant ahead of the other tests' rows, after a first
      // purge at that instant clears what they left behind, so the count is exact.
      const t = new Date(Date.now() + 60 * MIN);
      await store.purgeExpired(t);
      const acct = await account();
      const dev = await pairedDevice(acct.id); // its code is now used
      const live = hashPairingCode(newPairingCode());
      await store.createPairingCode({ accountId: acct.id, codeHash: live, expiresAt: new Date(t.getTime() + MIN) });
      await store.createPairingCode({
        accountId: acct.id,
        codeHash: hashPairingCode(newPairingCode()),
        expiresAt: new Date(t.getTime() - 1),
      });
      const expired = await newToken(acct.id, dev.id, { expiresAt: t });
      const forever = await newToken(acct.id, dev.id);
      const later = await newToken(acct.id, dev.id, { expiresAt: new Date(t.getTime() + 1) });
      expect(await store.purgeExpired(t)).toBe(3);
      expect(await store.purgeExpired(t)).toBe(0);
      const left = (await store.listTokens({ accountId: acct.id })).map((x) => x.id).sort();
      expect(left).toEqual([forever.r, later.r].map((r) => (r.ok ? r.token.id : '')).sort());
      expect(expired.r.ok).toBe(true);
      expect((await raw.query('select code_hash from pairing_codes where account_id = $1', [acct.id])).rows).toEqual([
        { code_hash: live },
      ]);
    });

    it('purges removal records older than the retention with the rest', async () => {
      const acct = await account();
      const [old, recent] = [await pairedDevice(acct.id), await pairedDevice(acct.id)];
      for (const d of [old, recent]) expect(await store.removeDevice(d.id)).toBe(true);
      const now = new Date();
      await raw.query('update removed_devices set removed_at = $2 where id = $1', [
        old.id,
        new Date(now.getTime() - REMOVED_DEVICE_RETENTION_MS - 1000),
      ]);
      await raw.query('update removed_devices set removed_at = $2 where id = $1', [
        recent.id,
        new Date(now.getTime() - REMOVED_DEVICE_RETENTION_MS + MIN),
      ]);
      await store.purgeExpired(now);
      expect([...(await store.getRemovedDevices([old.id, recent.id])).keys()]).toEqual([recent.id]);
    });

    it("purges hosted mode's expired or used sign-in codes and expired web sessions with the rest", async () => {
      const t = new Date(Date.now() + 60 * MIN);
      await store.purgeExpired(t);
      const acct = await account();
      const code = (name: string) => hashPairingCode(`${name}-${uid('c')}`);
      const [live, stale, used] = [code('live'), code('stale'), code('used')];
      const later = new Date(t.getTime() + MIN);
      await store.hosted.createSigninCode({ codeHash: live, email: 'a@example.com', nextPath: null, expiresAt: later });
      await store.hosted.createSigninCode({ codeHash: stale, email: 'b@example.com', nextPath: null, expiresAt: t });
      await store.hosted.createSigninCode({ codeHash: used, email: 'c@example.com', nextPath: null, expiresAt: later });
      expect(await store.hosted.consumeSigninCode(used, new Date())).toMatchObject({ email: 'c@example.com' });
      const [keep, lapsed] = [code('session'), code('lapsed')];
      await store.hosted.createWebSession({ tokenHash: keep, accountId: acct.id, expiresAt: later });
      await store.hosted.createWebSession({ tokenHash: lapsed, accountId: acct.id, expiresAt: t });
      expect(await store.purgeExpired(t)).toBe(3);
      const hashes = (table: string, column: string) =>
        raw.query(`select ${column} as h from ${table} where ${column} = any($1)`, [[live, stale, used, keep, lapsed]]);
      expect((await hashes('signin_codes', 'code_hash')).rows).toEqual([{ h: live }]);
      expect((await hashes('web_sessions', 'token_hash')).rows).toEqual([{ h: keep }]);
    });

    describe('hosted: accounts, sign-in, web sessions', () => {
      it('creates accounts by email (unique), lists them, sets plans, locks only existing ones', async () => {
        const email = `${uid('u')}@example.com`;
        const a = await store.createAccount({ id: uid('acct'), email, maxDevices: 1, maxKeys: 2 });
        expect(a).toMatchObject({ ok: true, account: { email, maxDevices: 1, maxKeys: 2, locked: false } });
        expect(await store.createAccount({ id: uid('acct'), email, maxDevices: 1, maxKeys: 1 })).toEqual({
          ok: false,
          error: 'email_taken',
        });
        const id = a.ok ? a.account.id : '';
        expect((await store.accountByEmail(email))?.id).toBe(id);
        expect(await store.setAccountPlan(id, { maxDevices: 5, maxKeys: null })).toBe(true);
        expect(await store.getAccount(id)).toMatchObject({ maxDevices: 5, maxKeys: null });
        expect(await store.setAccountPlan(uid('nope'), { maxDevices: 1, maxKeys: 1 })).toBe(false);
        expect(await store.setAccountLocked(uid('nope'), true)).toBe(false);
        expect((await store.listAccounts()).map((x) => x.id)).toEqual(expect.arrayContaining([LOCAL_ACCOUNT_ID, id]));
      });

      it('a sign-in code is single use, expires, and is found only by its hash', async () => {
        const now = new Date();
        const hash = sha256Hex(uid('signin'));
        await store.hosted.createSigninCode({
          codeHash: hash,
          email: 'x@example.com',
          nextPath: '/account',
          expiresAt: new Date(now.getTime() + 15 * MIN),
        });
        // Two racing consumers (separate pools): exactly one wins.
        const both = await Promise.all([
          store.hosted.consumeSigninCode(hash, now),
          other.hosted.consumeSigninCode(hash, now),
        ]);
        expect(both.filter(Boolean)).toEqual([{ email: 'x@example.com', nextPath: '/account' }]);
        expect(await store.hosted.consumeSigninCode(hash, now)).toBeUndefined();
        const old = sha256Hex(uid('signin'));
        await store.hosted.createSigninCode({ codeHash: old, email: 'y@example.com', nextPath: null, expiresAt: now });
        expect(await store.hosted.consumeSigninCode(old, now)).toBeUndefined();
        const plain = uid('plain');
        await store.hosted.createSigninCode({
          codeHash: sha256Hex(plain),
          email: 'z@example.com',
          nextPath: null,
          expiresAt: new Date(now.getTime() + MIN),
        });
        expect(await store.hosted.consumeSigninCode(plain, now)).toBeUndefined(); // the plain code is not a key
      });

      it('web sessions are found while unexpired and deleted on sign-out', async () => {
        const acct = await account();
        const hash = sha256Hex(uid('sess'));
        const now = new Date();
        await store.hosted.createWebSession({
          tokenHash: hash,
          accountId: acct.id,
          expiresAt: new Date(now.getTime() + MIN),
        });
        expect(await store.hosted.findWebSession(hash, now)).toMatchObject({ accountId: acct.id });
        expect(await store.hosted.findWebSession(hash, new Date(now.getTime() + 2 * MIN))).toBeUndefined();
        await store.hosted.deleteWebSession(hash);
        expect(await store.hosted.findWebSession(hash, now)).toBeUndefined();
      });
    });

    describe('hosted: OAuth', () => {
      const pair = (now = Date.now()) => ({
        access: { id: uid('oat'), hash: sha256Hex(uid('a')), expiresAt: new Date(now + 60 * MIN) },
        refresh: { hash: sha256Hex(uid('r')), expiresAt: new Date(now + 30 * 24 * 60 * MIN) },
      });

      async function setup() {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const client = await store.hosted.registerOAuthClient({
          id: uid('cli'),
          name: 'Test client',
          redirectUris: ['http://127.0.0.1:9/cb'],
        });
        return { acct, dev, client };
      }

      /** setup() with a grant of these scopes issued; `first` is its token pair. */
      async function issuedGrant(scopes: Scope[] = ['devices:read']) {
        const { acct, dev, client } = await setup();
        const first = pair();
        await store.hosted.issueOAuthGrant({
          grantId: uid('grant'),
          accountId: acct.id,
          clientId: client.id,
          deviceId: dev.id,
          scopes,
          ...first,
        });
        return { acct, client, first };
      }

      it('an authorization code is single use (even under a race) and expires', async () => {
        const { acct, dev, client } = await setup();
        const now = new Date();
        const code = {
          clientId: client.id,
          redirectUri: 'http://127.0.0.1:9/cb',
          codeChallenge: 'chal',
          resource: 'http://relay/mcp',
          accountId: acct.id,
          deviceId: dev.id,
          scopes: ['devices:read'] as Scope[],
        };
        const hash = sha256Hex(uid('code'));
        await store.hosted.createAuthorizationCode({
          ...code,
          codeHash: hash,
          expiresAt: new Date(now.getTime() + 5 * MIN),
        });
        const both = await Promise.all([
          store.hosted.consumeAuthorizationCode(hash, now),
          other.hosted.consumeAuthorizationCode(hash, now),
        ]);
        expect(both.filter(Boolean)).toEqual([code]);
        const late = sha256Hex(uid('code'));
        await store.hosted.createAuthorizationCode({
          ...code,
          codeHash: late,
          expiresAt: new Date(now.getTime() + 5 * MIN),
        });
        expect(await store.hosted.consumeAuthorizationCode(late, new Date(now.getTime() + 5 * MIN))).toBeUndefined();
        expect(await store.hosted.getOAuthClient(client.id)).toMatchObject({ name: 'Test client' });
      });

      it('a metadata client is created, then updated in place (its grants stay)', async () => {
        const acct = await account();
        const dev = await pairedDevice(acct.id);
        const id = `https://app.example/${uid('c')}.json`;
        await store.hosted.putMetadataClient({ id, name: 'First', redirectUris: ['http://127.0.0.1:1/cb'] });
        const issued = await store.hosted.issueOAuthGrant({
          grantId: uid('grant'),
          accountId: acct.id,
          clientId: id,
          deviceId: dev.id,
          scopes: ['devices:read'],
          ...pair(),
        });
        expect(issued.ok).toBe(true);
        const updated = await other.hosted.putMetadataClient({
          id,
          name: 'Second',
          redirectUris: ['https://app.example/cb'],
        });
        expect(updated).toMatchObject({ id, name: 'Second', redirectUris: ['https://app.example/cb'] });
        expect(await store.hosted.getOAuthClient(id)).toMatchObject({ name: 'Second' });
        expect((await store.hosted.listOAuthGrants(acct.id)).map((g) => [g.clientId, g.clientName])).toEqual([
          [id, 'Second'],
        ]);
      });

      it('issues a grant; refresh rotates; a rotated refresh token revokes the grant and its access tokens', async () => {
        const { acct, dev, client } = await setup();
        const first = pair();
        const issued = await store.hosted.issueOAuthGrant({
          grantId: uid('grant'),
          accountId: acct.id,
          clientId: client.id,
          deviceId: dev.id,
          scopes: ['devices:read', 'devices:act'],
          ...first,
        });
        expect(issued).toMatchObject({ ok: true, token: { via: 'oauth', deviceId: dev.id } });
        expect(await store.findTokenByHash(first.access.hash, new Date())).toMatchObject({
          scopes: ['devices:read', 'devices:act'],
        });
        // Another client cannot use this refresh token.
        expect(
          await store.hosted.refreshOAuthGrant({
            refreshHash: first.refresh.hash,
            clientId: 'other',
            now: new Date(),
            ...pair(),
          }),
        ).toEqual({ ok: false, error: 'invalid' });
        const second = pair();
        const rotated = await store.hosted.refreshOAuthGrant({
          refreshHash: first.refresh.hash,
          clientId: client.id,
          now: new Date(),
          ...second,
        });
        expect(rotated).toMatchObject({ ok: true, token: { scopes: ['devices:read', 'devices:act'] } });
        expect(await store.findTokenByHash(second.access.hash, new Date())).toBeDefined();
        const grants = await store.hosted.listOAuthGrants(acct.id);
        expect(grants).toMatchObject([{ clientName: 'Test client', deviceId: dev.id }]);

        const before = await store.controlEventsAfter(null);
        expect(
          await store.hosted.refreshOAuthGrant({
            refreshHash: first.refresh.hash,
            clientId: client.id,
            now: new Date(),
            ...pair(),
          }),
        ).toEqual({ ok: false, error: 'reused' });
        expect(await store.findTokenByHash(first.access.hash, new Date())).toBeUndefined();
        expect(await store.findTokenByHash(second.access.hash, new Date())).toBeUndefined();
        expect(await store.hosted.listOAuthGrants(acct.id)).toEqual([]);
        // The newest refresh token died with the grant.
        expect(
          await store.hosted.refreshOAuthGrant({
            refreshHash: second.refresh.hash,
            clientId: client.id,
            now: new Date(),
            ...pair(),
          }),
        ).toEqual({ ok: false, error: 'invalid' });
        const after = await store.controlEventsAfter(before.lastId);
        expect(after.events).toEqual(
          expect.arrayContaining([
            { type: 'token_revoked', tokenId: first.access.id },
            { type: 'token_revoked', tokenId: second.access.id },
          ]),
        );
      });

      it('a grant keeps when it last minted a token once the token is purged; a refresh moves it', async () => {
        // docs/HOSTED.md (5. Token): the dashboard lists "when its last token was minted".
        const { acct, dev, client } = await setup();
        const first = pair();
        const grantId = uid('grant');
        await store.hosted.issueOAuthGrant({
          grantId,
          accountId: acct.id,
          clientId: client.id,
          deviceId: dev.id,
          scopes: ['devices:read'],
          ...first,
        });
        const minted = (await raw.query('select created_at from tokens where id = $1', [first.access.id])).rows[0]
          .created_at as Date;
        const lastToken = async () =>
          (await store.hosted.listOAuthGrants(acct.id)).find((g) => g.id === grantId)?.lastUsedAt;
        expect(await lastToken()).toEqual(minted);
        // The access token expired an hour later and the node's purge deleted it; the grant stays.
        await store.purgeExpired(new Date(first.access.expiresAt.getTime() + MIN));
        expect(await store.findTokenByHash(first.access.hash, new Date())).toBeUndefined();
        expect(await lastToken()).toEqual(minted);

        const second = pair();
        const rotated = await store.hosted.refreshOAuthGrant({
          refreshHash: first.refresh.hash,
          clientId: client.id,
          now: new Date(),
          ...second,
        });
        expect(rotated.ok).toBe(true);
        const refreshed = (await raw.query('select created_at from tokens where id = $1', [second.access.id])).rows[0]
          .created_at as Date;
        expect(await lastToken()).toEqual(refreshed);
        // A node of the release before migration 009 mints without writing the column: its newer
        // token still shows.
        const later = new Date(refreshed.getTime() + MIN);
        await raw.query('update tokens set created_at = $2 where id = $1', [second.access.id, later]);
        expect(await lastToken()).toEqual(later);
      });

      it('a refresh may narrow the access token’s scopes, never widen them; a refused one rotates nothing', async () => {
        const { client, first } = await issuedGrant(['devices:read', 'devices:act']);
        const refresh = (refreshHash: string, scopes?: Scope[], next = pair()) =>
          store.hosted.refreshOAuthGrant({ refreshHash, clientId: client.id, now: new Date(), scopes, ...next });
        expect(await refresh(first.refresh.hash, ['devices:read', 'devices:lease'])).toEqual({
          ok: false,
          error: 'scope',
          granted: ['devices:read', 'devices:act'],
        });
        // Not rotated: the same refresh token works once, for a narrower access token.
        const narrow = pair();
        expect(await refresh(first.refresh.hash, ['devices:read'], narrow)).toMatchObject({
          ok: true,
          token: { scopes: ['devices:read'] },
        });
        expect(await store.findTokenByHash(narrow.access.hash, new Date())).toMatchObject({ scopes: ['devices:read'] });
        // The grant keeps the whole: the next refresh without scopes has both again.
        expect(await refresh(narrow.refresh.hash)).toMatchObject({
          ok: true,
          token: { scopes: ['devices:read', 'devices:act'] },
        });
      });

      it('refused: a rotated refresh token still revokes the grant; a live one rotates nothing', async () => {
        const { acct, client, first } = await issuedGrant();
        const refresh = (refreshHash: string, refused?: boolean, next = pair()) =>
          store.hosted.refreshOAuthGrant({ refreshHash, clientId: client.id, now: new Date(), refused, ...next });
        expect(await refresh(first.refresh.hash, true)).toEqual({ ok: false, error: 'refused' });
        const second = pair();
        expect(await refresh(first.refresh.hash, false, second)).toMatchObject({ ok: true });
        expect(await refresh(first.refresh.hash, true)).toEqual({ ok: false, error: 'reused' });
        expect(await store.hosted.listOAuthGrants(acct.id)).toEqual([]);
        expect(await store.findTokenByHash(second.access.hash, new Date())).toBeUndefined();
      });

      it('a rotated refresh token revokes the grant under another client id too; a live one there changes nothing', async () => {
        const { acct, client, first } = await issuedGrant();
        const refresh = (refreshHash: string, clientId: string, next = pair()) =>
          store.hosted.refreshOAuthGrant({ refreshHash, clientId, now: new Date(), ...next });
        const second = pair();
        expect(await refresh(first.refresh.hash, client.id, second)).toMatchObject({ ok: true });
        // The live token under another id: refused, and the grant and its token stay.
        expect(await refresh(second.refresh.hash, 'other')).toEqual({ ok: false, error: 'invalid' });
        expect(await store.findTokenByHash(second.access.hash, new Date())).toBeDefined();
        // The rotated one under another id: a copy is out, the grant ends.
        expect(await refresh(first.refresh.hash, 'other')).toEqual({ ok: false, error: 'reused' });
        expect(await store.hosted.listOAuthGrants(acct.id)).toEqual([]);
        expect(await store.findTokenByHash(second.access.hash, new Date())).toBeUndefined();
        expect(await refresh(second.refresh.hash, client.id)).toEqual({ ok: false, error: 'invalid' });
      });

      it('an expired refresh token is refused; revokeOAuthGrant and removing the phone end the grant', async () => {
        const { acct, dev, client } = await setup();
        const p = pair();
        p.refresh.expiresAt = new Date(Date.now() - 1);
        await store.hosted.issueOAuthGrant({
          grantId: uid('grant'),
          accountId: acct.id,
          clientId: client.id,
          deviceId: dev.id,
          scopes: ['devices:read'],
          ...p,
        });
        expect(
          await store.hosted.refreshOAuthGrant({
            refreshHash: p.refresh.hash,
            clientId: client.id,
            now: new Date(),
            ...pair(),
          }),
        ).toEqual({ ok: false, error: 'invalid' });
        const [g] = await store.hosted.listOAuthGrants(acct.id);
        expect(await store.hosted.revokeOAuthGrant(g.id)).toBe(true);
        expect(await store.hosted.revokeOAuthGrant(g.id)).toBe(false);
        expect(await store.findTokenByHash(p.access.hash, new Date())).toBeUndefined();

        const q = pair();
        await store.hosted.issueOAuthGrant({
          grantId: uid('grant'),
          accountId: acct.id,
          clientId: client.id,
          deviceId: dev.id,
          scopes: ['devices:read'],
          ...q,
        });
        expect(await store.removeDevice(dev.id)).toBe(true);
        expect(await store.hosted.listOAuthGrants(acct.id)).toEqual([]);
        // A grant for a phone of another account (or no phone) is refused.
        const otherAcct = await account();
        expect(
          await store.hosted.issueOAuthGrant({
            grantId: uid('grant'),
            accountId: otherAcct.id,
            clientId: client.id,
            deviceId: dev.id,
            scopes: ['devices:read'],
            ...pair(),
          }),
        ).toEqual({ ok: false, error: 'no_device' });
      });
    });

    it('openStore reopens the same database (no-op migration, data kept)', async () => {
      const acct = await account();
      const dev = await pairedDevice(acct.id);
      if (backend.name === 'embedded') {
        // Restart the embedded database for real: stop serving, then serve again.
        await other.close();
        await store.close();
        await raw.end();
        await source.close();
        closed = true;
      }
      const h = await openStore(backend.reopenOptions());
      try {
        expect(h.store.schemaVersion).toBe(LATEST_SCHEMA_VERSION);
        expect(h.source.kind).toBe(backend.name);
        expect(await h.store.getDevice(dev.id)).toMatchObject({ id: dev.id, accountId: acct.id });
        expect(await h.store.getAccount(LOCAL_ACCOUNT_ID)).toBeDefined();
      } finally {
        await h.close();
      }
    });
  });
}
