// Store on Kysely + pg. The same code serves Postgres and embedded PGlite (through its socket).
// Fleets' part (store.fleet, fleet-store.ts) and hosted mode's part (store.hosted,
// hosted-store.ts) are built in KyselyStore's constructor over the same Kysely instance.
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from './kysely.ts';
import type { Selectable, Transaction } from 'kysely';
import pg from 'pg';
import type { DatabaseSource } from './database/types.ts';
import { migrate, readSchemaVersion } from './migrations/index.ts';
import { advanceTail, formatTailCursor, parseTailCursor, TAIL_START_WINDOW } from './journal-tail.ts';
import type { AccountsTable, DB } from './schema.ts';
import { observeStoreQuery, observeStoreStatement } from '../metrics.ts';
import { atKeyCap, credentialsInUse, deviceOfAccountKeyShared, lockAccountCaps, toToken } from './credentials.ts';
import { KyselyFleetStore } from './fleet-store.ts';
import { toDevice } from './device-row.ts';
import type { FleetStore } from './fleet-types.ts';
import { KyselyHostedStore, purgeHostedExpired } from './hosted-store.ts';
import type { HostedStore } from './hosted-types.ts';
import { journal } from './journal.ts';
import type {
  Account,
  ControlEvent,
  CreateTokenResult,
  Device,
  DeviceKey,
  DeviceSeen,
  RedeemResult,
  RemovedDevice,
  Scope,
  Store,
  Token,
} from './types.ts';
import { REMOVED_DEVICE_RETENTION_MS } from './types.ts';
import { parseJson, stringifyJson } from '../protocol/exact-json.ts';

export interface CreateStoreOptions {
  /** pg pool size. PGlite runs one query at a time, so a few connections are plenty there. */
  poolMax?: number;
  /** Run migrations (default true). With false, schemaVersion is read, not changed. */
  migrate?: boolean;
}

function toAccount(r: Selectable<AccountsTable>): Account {
  return {
    id: r.id,
    maxDevices: r.max_devices,
    maxKeys: r.max_keys,
    locked: r.locked,
    email: r.email,
    createdAt: r.created_at,
  };
}

function sameSecret(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

async function countDevices(trx: Transaction<DB>, accountId: string): Promise<number> {
  const r = await trx
    .selectFrom('devices')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/**
 * The journal poll's statement (tailControlEvents), run four times a second by every node.
 * Prepared once per connection under a name of its own: planning it again on every poll was
 * most of the poll's cost, and on embedded PGlite that runs in the relay's own thread
 * (docs/decisions/0136-prepared-journal-poll.md).
 */
const TAIL_SQL = `
      with snap as (select pg_current_snapshot() as s),
      fresh as (
        select id, event from control_events
        where id > $1::bigint and not (id = any($2::bigint[]))
        order by id limit $3
      )
      select pg_snapshot_xmin(snap.s)::text as xmin, pg_snapshot_xmax(snap.s)::text as xmax,
             fresh.id::text as id, fresh.event
      from snap left join fresh on true
      order by fresh.id`;

/**
 * A statement name per pg client, never reused: pglite-socket serves every connection from one
 * PGlite session, where a reconnected client (which knows of no prepared statement) would
 * otherwise meet the name its predecessor prepared.
 */
const tailStatement = new WeakMap<pg.PoolClient, string>();
/** SQLSTATE invalid_sql_statement_name: "prepared statement … does not exist". */
const UNKNOWN_STATEMENT = '26000';
type TailRow = { xmin: string; xmax: string; id: string | null; event: unknown };

class KyselyStore implements Store {
  readonly fleet: FleetStore;
  readonly hosted: HostedStore;
  /** The source's, where it counts its changes (Store.changeCount). */
  readonly changeCount?: () => number;

  constructor(
    private readonly db: Kysely<DB>,
    readonly schemaVersion: number,
    private readonly pool: pg.Pool,
    source?: DatabaseSource,
  ) {
    this.fleet = new KyselyFleetStore(db);
    this.hosted = new KyselyHostedStore(db);
    this.changeCount = source?.changeCount;
  }

  /**
   * The journal poll's read, as a prepared statement on one of the pool's connections. A server
   * that lost the statement (PGlite's one session is shared: DEALLOCATE on any connection) costs
   * a second try on a fresh connection, never a failed poll.
   */
  private async readTail(safe: bigint, delivered: string[], limit: number): Promise<TailRow[]> {
    const started = performance.now();
    let ok = false;
    try {
      for (let attempt = 0; ; attempt++) {
        const client = await this.pool.connect();
        let failed: Error | undefined;
        try {
          let name = tailStatement.get(client);
          if (!name) tailStatement.set(client, (name = `pb_tail_${randomBytes(8).toString('hex')}`));
          const r = await client.query<TailRow>({ name, text: TAIL_SQL, values: [String(safe), delivered, limit] });
          ok = true;
          return r.rows;
        } catch (err) {
          failed = err instanceof Error ? err : new Error(String(err));
          if (attempt > 0 || (err as { code?: string }).code !== UNKNOWN_STATEMENT) throw err;
        } finally {
          // A failed client is closed, not reused: its successor prepares afresh under a new name.
          client.release(failed);
        }
      }
    } finally {
      observeStoreStatement('other', ok, performance.now() - started);
    }
  }

  async ensureAccount(id: string, limits?: { maxDevices?: number | null; maxKeys?: number | null }): Promise<Account> {
    // Insert if absent. Limits passed explicitly are applied to an existing account too, so
    // calling it again with the same arguments leaves the same state (idempotent); limits left
    // out (undefined) are never touched; null means unlimited.
    const update: { max_devices?: number | null; max_keys?: number | null } = {};
    if (limits?.maxDevices !== undefined) update.max_devices = limits.maxDevices;
    if (limits?.maxKeys !== undefined) update.max_keys = limits.maxKeys;
    const row = await this.db
      .insertInto('accounts')
      .values({ id, max_devices: update.max_devices ?? null, max_keys: update.max_keys ?? null })
      .onConflict((oc) =>
        Object.keys(update).length ? oc.column('id').doUpdateSet(update) : oc.column('id').doNothing(),
      )
      .returningAll()
      .executeTakeFirst();
    // DO NOTHING returns no row when it already existed.
    return row ? toAccount(row) : (await this.getAccount(id))!;
  }

  async getAccount(id: string): Promise<Account | undefined> {
    const r = await this.db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
    return r && toAccount(r);
  }

  async setAccountLocked(id: string, locked: boolean): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const r = await trx.updateTable('accounts').set({ locked }).where('id', '=', id).executeTakeFirst();
      if (r.numUpdatedRows === 0n) return false;
      await journal(trx, { type: 'account_locked', accountId: id, locked });
      return true;
    });
  }

  async listAccounts(): Promise<Account[]> {
    const rows = await this.db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
    return rows.map(toAccount);
  }

  async createAccount(input: {
    id: string;
    email: string | null;
    maxDevices: number | null;
    maxKeys: number | null;
  }): Promise<{ ok: true; account: Account } | { ok: false; error: 'email_taken' }> {
    const row = await this.db
      .insertInto('accounts')
      .values({ id: input.id, email: input.email, max_devices: input.maxDevices, max_keys: input.maxKeys })
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst();
    return row ? { ok: true, account: toAccount(row) } : { ok: false, error: 'email_taken' };
  }

  async accountByEmail(email: string): Promise<Account | undefined> {
    const r = await this.db.selectFrom('accounts').selectAll().where('email', '=', email).executeTakeFirst();
    return r && toAccount(r);
  }

  async setAccountPlan(id: string, plan: { maxDevices: number | null; maxKeys: number | null }): Promise<boolean> {
    const r = await this.db
      .updateTable('accounts')
      .set({ max_devices: plan.maxDevices, max_keys: plan.maxKeys })
      .where('id', '=', id)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  async countCredentials(accountId: string): Promise<number> {
    return credentialsInUse(this.db, accountId);
  }

  async createPairingCode(input: {
    accountId: string;
    codeHash: string;
    expiresAt: Date;
    name?: string | null;
  }): Promise<{ ok: true } | { ok: false; error: 'limit_reached' }> {
    return this.db.transaction().execute(async (trx) => {
      const account = await trx
        .selectFrom('accounts')
        .select('max_devices')
        .where('id', '=', input.accountId)
        .executeTakeFirst();
      if (!account) throw new Error(`unknown account ${input.accountId}`);
      // First check of the plan cap (redeemPairingCode checks again at redemption).
      if (account.max_devices !== null && (await countDevices(trx, input.accountId)) >= account.max_devices) {
        return { ok: false as const, error: 'limit_reached' as const };
      }
      await trx
        .insertInto('pairing_codes')
        .values({
          code_hash: input.codeHash,
          account_id: input.accountId,
          name: input.name ?? null,
          expires_at: input.expiresAt,
        })
        .execute();
      return { ok: true as const };
    });
  }

  async redeemPairingCode(input: {
    codeHash: string;
    deviceId: string;
    publicKey: string;
    name: string;
    now: Date;
  }): Promise<RedeemResult> {
    // An enrollment code of an account without a phone cap — a rack pairing hundreds of phones
    // at once — is one statement and no transaction (docs/decisions/0176-enrollment-in-one-statement.md);
    // any enrollment code's phone asking again is answered there too (0238).
    return (await takeEnrollmentSlot(this.db, input, { uncappedOnly: true })) ?? this.redeemIn(input);
  }

  private redeemIn(input: {
    codeHash: string;
    deviceId: string;
    publicKey: string;
    name: string;
    now: Date;
  }): Promise<RedeemResult> {
    return this.db.transaction().execute(async (trx): Promise<RedeemResult> => {
      // FOR UPDATE: of two concurrent redemptions, the second waits here and then sees used_at set.
      const code = await trx
        .selectFrom('pairing_codes')
        .selectAll()
        .where('code_hash', '=', input.codeHash)
        .forUpdate()
        .executeTakeFirst();
      // Not a one-phone code: an enrollment code of a capped account, or a used-up, revoked,
      // expired or unknown one.
      if (!code) return redeemCappedEnrollment(trx, input);
      // Wrong, used and expired all look the same to the caller (no oracle).
      if (!sameSecret(code.code_hash, input.codeHash)) return { ok: false, error: 'bad_code' };
      if (code.expires_at.getTime() <= input.now.getTime()) return { ok: false, error: 'bad_code' };
      if (code.used_at !== null) {
        // The phone that used it asking again (its answer was lost): its device, nothing new
        // (docs/decisions/0238-a-pairing-repeated-by-its-phone.md).
        const device = await pairedWithCode(trx, code.account_id, code.used_at, input.publicKey);
        return device ? { ok: true, device, repeated: true } : { ok: false, error: 'bad_code' };
      }
      // Lock the account row so two different codes of one account cannot both take the last slot.
      const account = await lockAccountCaps(trx, code.account_id);
      if (!account) return { ok: false, error: 'bad_code' };
      if (account.max_devices !== null && (await countDevices(trx, code.account_id)) >= account.max_devices) {
        // The code is deliberately NOT consumed: the owner can free a slot (remove a phone or
        // upgrade) and the phone can retry with the same QR while it is still valid.
        return { ok: false, error: 'limit_reached' };
      }
      await trx
        .updateTable('pairing_codes')
        .set({ used_at: input.now })
        .where('code_hash', '=', code.code_hash)
        .execute();
      const device = await trx
        .insertInto('devices')
        .values({
          id: input.deviceId,
          account_id: code.account_id,
          // The name the owner gave when creating the code wins over the phone's own.
          name: code.name ?? input.name,
          public_key: input.publicKey,
          created_at: input.now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { ok: true, device: toDevice(device) };
    });
  }

  async getDevice(id: string): Promise<Device | undefined> {
    const r = await this.db.selectFrom('devices').selectAll().where('id', '=', id).executeTakeFirst();
    return r && toDevice(r);
  }

  async listDevices(accountId?: string): Promise<Device[]> {
    let q = this.db.selectFrom('devices').selectAll();
    if (accountId !== undefined) q = q.where('account_id', '=', accountId);
    const rows = await q.orderBy('created_at').orderBy('id').execute();
    return rows.map(toDevice);
  }

  async removeDevice(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      // The foreign key cascades too; deleting explicitly keeps this correct even if it is ever relaxed.
      await trx.deleteFrom('tokens').where('device_id', '=', id).execute();
      const gone = await trx
        .deleteFrom('devices')
        .where('id', '=', id)
        .returning(['account_id', 'public_key'])
        .executeTakeFirst();
      if (!gone) return false;
      // Its phone may come back later (offline now, or a copy of its state dir): it is told it
      // was removed (docs/decisions/0230-removed-devices-are-remembered.md). Ids are the relay's
      // own and never reused; should one be removed twice all the same, the latest removal wins.
      await trx
        .insertInto('removed_devices')
        .values({ id, account_id: gone.account_id, public_key: gone.public_key })
        .onConflict((oc) =>
          oc.column('id').doUpdateSet((eb) => ({
            account_id: eb.ref('excluded.account_id'),
            public_key: eb.ref('excluded.public_key'),
            removed_at: eb.ref('excluded.removed_at'),
          })),
        )
        .execute();
      await journal(trx, { type: 'device_removed', deviceId: id });
      return true;
    });
  }

  async saveDeviceInitResult(id: string, initResult: unknown, seenAt: Date): Promise<void> {
    await this.db
      .updateTable('devices')
      .set({
        init_result: initResult === null || initResult === undefined ? null : stringifyJson(initResult),
        last_seen_at: seenAt,
      })
      .where('id', '=', id)
      .execute();
  }

  async touchDevice(id: string, seenAt: Date): Promise<void> {
    await this.db.updateTable('devices').set({ last_seen_at: seenAt }).where('id', '=', id).execute();
  }

  async getDeviceKeys(ids: readonly string[]): Promise<Map<string, DeviceKey>> {
    const out = new Map<string, DeviceKey>();
    if (ids.length === 0) return out;
    // One array parameter whatever the batch size: an `in` list costs the query builder and
    // pg a node and a parameter per id (docs/decisions/0144-accept-cuts.md).
    const { rows } = await sql<{ id: string; account_id: string; public_key: string }>`
      select id, account_id, public_key from devices where id = any(${[...new Set(ids)]}::text[])`.execute(this.db);
    for (const r of rows) out.set(r.id, { accountId: r.account_id, publicKey: r.public_key });
    return out;
  }

  async getRemovedDevices(ids: readonly string[]): Promise<Map<string, RemovedDevice>> {
    const out = new Map<string, RemovedDevice>();
    if (ids.length === 0) return out;
    const { rows } = await sql<{ id: string; account_id: string; public_key: string; removed_at: Date }>`
      select id, account_id, public_key, removed_at from removed_devices
       where id = any(${[...new Set(ids)]}::text[])`.execute(this.db);
    for (const r of rows) out.set(r.id, { accountId: r.account_id, publicKey: r.public_key, removedAt: r.removed_at });
    return out;
  }

  async recordDevicesSeen(entries: readonly DeviceSeen[]): Promise<void> {
    // One row per device: the latest time, and the latest initialize result given for it
    // (0: keep the stored one, -1: clear it, k: the k-th distinct result of this batch).
    const merged = new Map<string, { seen: Date; init: number }>();
    // Phones of a fleet share one initialize result object (src/gateway/intern-table.ts):
    // serialised and sent once per batch, not once per row.
    const distinct = new Map<unknown, number>();
    const texts: string[] = [];
    const indexOf = (v: unknown) => {
      let k = distinct.get(v);
      if (k === undefined) {
        texts.push(stringifyJson(v));
        distinct.set(v, (k = texts.length));
      }
      return k;
    };
    for (const e of entries) {
      const m = merged.get(e.id) ?? { seen: e.seenAt, init: 0 };
      if (e.seenAt > m.seen) m.seen = e.seenAt;
      if ('initResult' in e) m.init = e.initResult === null || e.initResult === undefined ? -1 : indexOf(e.initResult);
      merged.set(e.id, m);
    }
    if (merged.size === 0) return;
    const ids: string[] = [];
    const seen: Date[] = [];
    const init: number[] = [];
    for (const [id, m] of merged) {
      ids.push(id);
      seen.push(m.seen);
      init.push(m.init);
    }
    // Four array parameters whatever the batch size (a VALUES list would take several per row).
    await sql`
      update devices as d
      set last_seen_at = greatest(d.last_seen_at, v.seen),
          init_result = case when v.init = 0 then d.init_result else i.result end
      from unnest(${ids}::text[], ${seen}::timestamptz[], ${init}::int[]) as v(id, seen, init)
      left join (
        select n::int as n, t::jsonb as result from unnest(${texts}::text[]) with ordinality as u(t, n)
      ) as i on i.n = v.init
      where d.id = v.id`.execute(this.db);
  }

  async createToken(input: {
    id: string;
    accountId: string;
    deviceId: string;
    hash: string;
    scopes: Scope[];
    via: 'key' | 'oauth';
    expiresAt?: Date | null;
  }): Promise<CreateTokenResult> {
    return this.db.transaction().execute(async (trx): Promise<CreateTokenResult> => {
      // Serialises key creation per account so the cap holds under concurrency.
      const account = await lockAccountCaps(trx, input.accountId);
      if (!account) return { ok: false, error: 'no_device' };
      // KEY SHARE keeps the device from being removed between this check and the insert.
      const device = await deviceOfAccountKeyShared(trx, input.deviceId, input.accountId);
      if (!device) return { ok: false, error: 'no_device' };
      // The plan caps standing credentials (credentialsInUse: API keys, fleet keys and OAuth
      // grants). OAuth access tokens are minted on every refresh, so they are not counted; their
      // grant is (docs/decisions/0164-grants-count-against-the-key-cap.md).
      if (input.via === 'key' && (await atKeyCap(trx, input.accountId, account.max_keys)))
        return { ok: false, error: 'limit_reached' };
      const row = await trx
        .insertInto('tokens')
        .values({
          id: input.id,
          account_id: input.accountId,
          device_id: input.deviceId,
          hash: input.hash,
          scopes: [...input.scopes],
          via: input.via,
          expires_at: input.expiresAt ?? null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { ok: true, token: toToken(row) };
    });
  }

  async findTokenByHash(hash: string, now: Date): Promise<Token | undefined> {
    const r = await this.db
      .selectFrom('tokens')
      // A token counts only while its device exists in the same account.
      .innerJoin('devices', (j) =>
        j.onRef('devices.id', '=', 'tokens.device_id').onRef('devices.account_id', '=', 'tokens.account_id'),
      )
      .selectAll('tokens')
      .where('tokens.hash', '=', hash)
      .where((eb) => eb.or([eb('tokens.expires_at', 'is', null), eb('tokens.expires_at', '>', now)]))
      .executeTakeFirst();
    return r && toToken(r);
  }

  async listTokens(filter: { accountId?: string; deviceId?: string } = {}): Promise<Token[]> {
    let q = this.db.selectFrom('tokens').selectAll();
    if (filter.accountId !== undefined) q = q.where('account_id', '=', filter.accountId);
    if (filter.deviceId !== undefined) q = q.where('device_id', '=', filter.deviceId);
    const rows = await q.orderBy('created_at').orderBy('id').execute();
    return rows.map(toToken);
  }

  async revokeToken(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const r = await trx
        .deleteFrom('tokens')
        .where('id', '=', id)
        .returning(['device_id', 'grant_id'])
        .executeTakeFirst();
      if (!r) return false;
      await journal(trx, { type: 'token_revoked', tokenId: id });
      // One access token of a grant is not the phone's caller: the grant is, and it lives on.
      if (r.grant_id === null)
        await journal(trx, { type: 'credential_revoked', credential: id, deviceId: r.device_id });
      return true;
    });
  }

  async controlEventsAfter(afterId: string | null, limit = 500): Promise<{ lastId: string; events: ControlEvent[] }> {
    if (afterId === null) {
      // Tail from now: history before this node started has already taken effect.
      const row = await this.db
        .selectFrom('control_events')
        .select((eb) => eb.fn.max('id').as('id'))
        .executeTakeFirst();
      return { lastId: String(row?.id ?? '0'), events: [] };
    }
    const rows = await this.db
      .selectFrom('control_events')
      .select(['id', 'event'])
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(limit)
      .execute();
    return {
      lastId: rows.length ? String(rows[rows.length - 1].id) : afterId,
      events: rows.map((r) => r.event as ControlEvent),
    };
  }

  async tailControlEvents(cursor: string | null, limit = 500): Promise<{ cursor: string; events: ControlEvent[] }> {
    const c = cursor === null ? undefined : parseTailCursor(cursor);
    if (!c) {
      // Tail from now: what is visible has taken effect; ids below the top that are still being
      // written (a transaction in flight) are read once they commit, as for any later poll.
      const r = await sql<{ hw: string | null; xmax: string }>`
        select (select max(id)::text from control_events) as hw,
               pg_snapshot_xmax(pg_current_snapshot())::text as xmax`.execute(this.db);
      const hw = BigInt(r.rows[0].hw ?? '0');
      const floor = hw > TAIL_START_WINDOW ? hw - TAIL_START_WINDOW : 0n;
      const seen = await this.db.selectFrom('control_events').select('id').where('id', '>', String(floor)).execute();
      return {
        cursor: formatTailCursor({
          safe: floor,
          pending: hw > floor ? [{ hw, xmax: BigInt(r.rows[0].xmax) }] : [],
          delivered: seen.map((x) => BigInt(x.id)),
        }),
        events: [],
      };
    }
    // One statement, one snapshot: the rows and the snapshot's bounds agree.
    const delivered = c.delivered.map(String);
    const all = await this.readTail(c.safe, delivered, limit);
    const xmin = BigInt(all[0].xmin);
    const xmax = BigInt(all[0].xmax);
    const rows = all.filter((x) => x.id !== null);
    const events = rows.map((x) => x.event as ControlEvent);
    const next = advanceTail(
      c,
      rows.map((x) => BigInt(x.id!)),
      rows.length === limit,
      xmin,
      xmax,
    );
    return { cursor: formatTailCursor(next), events };
  }

  async purgeExpired(now: Date): Promise<number> {
    return this.db.transaction().execute(async (trx) => {
      const codes = await trx
        .deleteFrom('pairing_codes')
        // A used code stays until it expires: its phone may ask again (redeemIn).
        .where('expires_at', '<=', now)
        .executeTakeFirst();
      const tokens = await trx.deleteFrom('tokens').where('expires_at', '<=', now).executeTakeFirst();
      const hosted = await purgeHostedExpired(trx, now);
      // The journal only needs to outlive the slowest poller.
      await trx
        .deleteFrom('control_events')
        .where('created_at', '<', new Date(now.getTime() - 3600_000))
        .execute();
      await trx
        .deleteFrom('removed_devices')
        .where('removed_at', '<', new Date(now.getTime() - REMOVED_DEVICE_RETENTION_MS))
        .execute();
      return Number(codes.numDeletedRows + tokens.numDeletedRows) + hosted;
    });
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }
}

/** json (114) and jsonb (3802) in text format. */
const JSON_OIDS = new Set([114, 3802]);
const readExactJson = (text: string): unknown => parseJson(text);
function exactJsonTypes(oid: number, format?: 'text' | 'binary'): (value: string) => unknown {
  if (JSON_OIDS.has(oid) && format !== 'binary') return readExactJson;
  return pg.types.getTypeParser(oid, format ?? 'text') as (value: string) => unknown;
}

/** A store over `source`. Migrates unless told not to; throws SchemaTooNewError on a newer schema. */
export async function createStore(source: DatabaseSource, options: CreateStoreOptions = {}): Promise<Store> {
  // Embedded: one connection per process. pglite-socket multiplexes every connection onto one
  // PGlite session, and concurrent extended-protocol exchanges from several connections of one
  // process interleave there ("portal does not exist", dropped connections under load).
  const pool = new pg.Pool({
    // A database that stops answering must turn into errors (503s), never into hung requests.
    // (Embedded: one connection, so this also bounds the wait behind other queries.)
    connectionTimeoutMillis: source.kind === 'embedded' ? 30_000 : 5_000,
    query_timeout: 15_000,
    // json and jsonb columns (a phone's initialize result) read with numbers as stored: jsonb
    // keeps 12345678901234567890, JSON.parse would not (src/protocol/exact-json.ts).
    types: { getTypeParser: exactJsonTypes as typeof pg.types.getTypeParser },
    ...source.pgConfig,
    max: options.poolMax ?? source.pgConfig.max ?? (source.kind === 'embedded' ? 1 : 10),
  });
  // A client whose server went away (embedded serve stopped, Postgres restarted) emits 'error';
  // without listeners — on the pool for idle clients, on each client while checked out — that
  // would crash the process. The failed query rejects; the pool replaces the client.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }), log: observeStoreQuery });
  try {
    const version = options.migrate === false ? await readSchemaVersion(db) : (await migrate(db)).to;
    return new KyselyStore(db, version, pool, source);
  } catch (err) {
    await db.destroy().catch(() => {});
    throw err;
  }
}

/** A pairing that gave the phone a device. */
type Redeemed = Extract<RedeemResult, { ok: true }>;

/**
 * The device a one-phone code paired at `usedAt`, if `publicKey` is its key and it is still
 * there: the code's row keeps its use time, and the device was created with that time in the
 * same transaction (redeemIn). Served by devices_account_idx (account_id, created_at).
 */
async function pairedWithCode(
  trx: Transaction<DB>,
  accountId: string,
  usedAt: Date,
  publicKey: string,
): Promise<Device | undefined> {
  const row = await trx
    .selectFrom('devices')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('created_at', '=', usedAt)
    .where('public_key', '=', publicKey)
    .executeTakeFirst();
  return row && toDevice(row);
}

/**
 * One phone of an enrollment code (docs/decisions/0173-enrollment.md,
 * 0176-enrollment-in-one-statement.md), in ONE statement: the code's counter is taken by a
 * conditional UPDATE (so N is never exceeded under any concurrency) and the phone inserted from
 * what it returned — named `<prefix><counter>`, with the code's labels. Run on its own it is its
 * own transaction, so the code's row lock lasts one statement and its commit: many phones of one
 * code pairing at once queue for microseconds there, not for round trips to the relay while
 * holding a pool connection. `uncappedOnly`: only for an account without a phone cap (a capped
 * account's pairings must count its phones under its lock first: redeemCappedEnrollment).
 * A phone this code already paired with this key, asking again, takes no slot and gets that
 * device (`repeated`) from a second query, run only when no slot was taken: capped account or
 * not, used-up code or not (docs/decisions/0238-a-pairing-repeated-by-its-phone.md).
 * undefined: no slot was taken (no such usable code, or a capped account with uncappedOnly).
 */
async function takeEnrollmentSlot(
  db: Kysely<DB>,
  input: { codeHash: string; deviceId: string; publicKey: string; name: string; now: Date },
  opts: { uncappedOnly: boolean },
): Promise<Redeemed | undefined> {
  let rows: Array<Selectable<DB['devices']>>;
  try {
    rows = await enrollSlot(db, input, opts);
  } catch (err) {
    // A copy of this phone's pairing committed first (run on its own, this statement rolled back
    // whole, its slot too). Inside a capped account's transaction the account lock serialises
    // copies, and an error there ends the transaction: it is not caught.
    if (!opts.uncappedOnly || !isUniqueViolation(err, ENROLLMENT_KEY_UNIQUE)) throw err;
    rows = [];
  }
  if (rows[0]) return { ok: true, device: toDevice(rows[0]) };
  // No slot taken: perhaps this code's phone asking again (a rare second round trip).
  return enrollmentRepeat(db, input);
}

/** The unique index that makes one enrollment code's key one phone (migration 008). */
const ENROLLMENT_KEY_UNIQUE = 'devices_enrollment_key_unique';

/** Postgres' unique_violation on `index`, by the error's fields (its message is in the server's language). */
function isUniqueViolation(err: unknown, index: string): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === index;
}

async function enrollSlot(
  db: Kysely<DB>,
  input: { codeHash: string; deviceId: string; publicKey: string; name: string; now: Date },
  opts: { uncappedOnly: boolean },
): Promise<Array<Selectable<DB['devices']>>> {
  const { rows } = await sql<Selectable<DB['devices']>>`
    with slot as (
      update enrollments e set used = e.used + 1
        from accounts a
       where e.code_hash = ${input.codeHash} and a.id = e.account_id
         and e.revoked_at is null and e.expires_at > ${input.now} and e.used < e.max_phones
         ${opts.uncappedOnly ? sql`and a.max_devices is null` : sql``}
         and not exists (
           select 1 from devices d where d.enrollment_id = e.id and d.public_key = ${input.publicKey}
         )
      returning e.id, e.account_id, e.used, e.name_prefix, e.labels
    )
    insert into devices (id, account_id, name, public_key, labels, enrollment_id, created_at)
    select ${input.deviceId}, slot.account_id, coalesce(slot.name_prefix || slot.used::text, ${input.name}),
           ${input.publicKey}, slot.labels, slot.id, ${input.now}
      from slot
    returning *`.execute(db);
  return rows;
}

/** The device this enrollment code, still usable but perhaps used up, paired with this key. */
async function enrollmentRepeat(
  db: Kysely<DB>,
  input: { codeHash: string; publicKey: string; now: Date },
): Promise<Redeemed | undefined> {
  const { rows: again } = await sql<Selectable<DB['devices']>>`
    select d.* from devices d join enrollments e on d.enrollment_id = e.id
     where e.code_hash = ${input.codeHash} and e.revoked_at is null and e.expires_at > ${input.now}
       and d.public_key = ${input.publicKey}
     limit 1`.execute(db);
  return again[0] && { ok: true, device: toDevice(again[0]), repeated: true };
}

/**
 * An enrollment code's phone for an account with a phone cap, inside the caller's transaction:
 * the account row is locked (as one-phone codes do) so two pairings cannot both take the last
 * phone, then the slot is taken as in takeEnrollmentSlot. Revoked, expired, used-up and unknown
 * codes are all bad_code; at the cap nothing is taken (limit_reached).
 */
async function redeemCappedEnrollment(
  trx: Transaction<DB>,
  input: { codeHash: string; deviceId: string; publicKey: string; name: string; now: Date },
): Promise<RedeemResult> {
  const code = await trx
    .selectFrom('enrollments')
    .select(['account_id', 'code_hash', 'used', 'max_phones', 'revoked_at', 'expires_at'])
    .where('code_hash', '=', input.codeHash)
    .executeTakeFirst();
  if (
    !code ||
    !sameSecret(code.code_hash, input.codeHash) ||
    code.revoked_at !== null ||
    code.expires_at.getTime() <= input.now.getTime()
  )
    return { ok: false, error: 'bad_code' };
  // A copy of this phone's pairing that committed first may have used up the code or reached
  // the cap: a refusal looks for its device first (each statement reads what was committed).
  if (code.used >= code.max_phones) return (await enrollmentRepeat(trx, input)) ?? { ok: false, error: 'bad_code' };
  const account = await lockAccountCaps(trx, code.account_id);
  if (!account) return { ok: false, error: 'bad_code' };
  if (account.max_devices !== null && (await countDevices(trx, code.account_id)) >= account.max_devices)
    return (await enrollmentRepeat(trx, input)) ?? { ok: false, error: 'limit_reached' };
  // Undefined: used up (or revoked) since the read above.
  return (await takeEnrollmentSlot(trx, input, { uncappedOnly: false })) ?? { ok: false, error: 'bad_code' };
}
