// FleetStore on Kysely + pg (src/store/fleet-types.ts). Allocation exclusivity lives here, in one
// conditional upsert on allocations' unique device_id (docs/decisions/0171-allocation-atomicity.md).
import { sql } from './kysely.ts';
import type { Kysely, RawBuilder, Selectable } from 'kysely';
import type { AllocationsTable, DB, DevicesTable, EnrollmentsTable, FleetKeysTable } from './schema.ts';
import type {
  Allocation,
  DeviceLabels,
  Enrollment,
  FleetKey,
  FleetStore,
  LabelledDevice,
  LabelRequirement,
} from './fleet-types.ts';
import type { Scope } from './types.ts';
import { atKeyCap, lockAccountCaps } from './credentials.ts';
import { toDevice } from './device-row.ts';
import { journal } from './journal.ts';

function toLabelledDevice(r: Selectable<DevicesTable>): LabelledDevice {
  return { ...toDevice(r), labels: r.labels ?? {} };
}

/** The parts of a cached initialize result facts are read from (src/fleet/labels.ts factLabels). */
const FACT_SOURCES = sql<unknown>`jsonb_build_object(
  'serverInfo', d.init_result->'serverInfo',
  'protocolVersion', d.init_result->'protocolVersion',
  '_meta', jsonb_build_object('phonebridge/device', d.init_result->'_meta'->'phonebridge/device'))`;

function toDeviceLabels(r: { id: string; account_id: string; labels: Record<string, string> | null; facts: unknown }) {
  return { id: r.id, accountId: r.account_id, labels: r.labels ?? {}, initResult: r.facts } satisfies DeviceLabels;
}

/**
 * A selector's requirements on hand-set labels as SQL conditions on `d.labels`, meaning what
 * src/fleet/labels.ts `matches` means (`neq`/`notin` hold without the label). The equalities go
 * together into one `@>`. The caller still matches the whole selector on what comes back.
 */
function labelConditions(reqs: readonly LabelRequirement[]): RawBuilder<boolean>[] {
  const contains: Record<string, string> = {};
  const out: RawBuilder<boolean>[] = [];
  for (const r of reqs) {
    const v = sql`(d.labels ->> ${r.key}::text)`;
    switch (r.op) {
      case 'eq':
        // A second value for one key (k=a,k=b) cannot share the object; it matches nothing either way.
        if (Object.prototype.hasOwnProperty.call(contains, r.key) && contains[r.key] !== r.value)
          out.push(sql<boolean>`d.labels @> ${JSON.stringify({ [r.key]: r.value })}::jsonb`);
        else contains[r.key] = r.value;
        break;
      case 'neq':
        out.push(sql<boolean>`${v} is distinct from ${r.value}::text`);
        break;
      case 'in':
        out.push(sql<boolean>`${v} = any(${r.values}::text[])`);
        break;
      case 'notin':
        out.push(sql<boolean>`not coalesce(${v} = any(${r.values}::text[]), false)`);
        break;
      case 'exists':
        out.push(sql<boolean>`d.labels ? ${r.key}::text`);
        break;
      case 'absent':
        out.push(sql<boolean>`not (d.labels ? ${r.key}::text)`);
        break;
    }
  }
  if (Object.keys(contains).length > 0) out.unshift(sql<boolean>`d.labels @> ${JSON.stringify(contains)}::jsonb`);
  return out;
}

function toKey(r: Selectable<FleetKeysTable>): FleetKey {
  return {
    id: r.id,
    accountId: r.account_id,
    scopes: r.scopes as Scope[],
    selector: r.selector,
    createdAt: r.created_at,
  };
}

function toAllocation(r: Selectable<AllocationsTable>): Allocation {
  return {
    id: r.id,
    deviceId: r.device_id,
    accountId: r.account_id,
    keyId: r.key_id,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
  };
}

function toEnrollment(r: Selectable<EnrollmentsTable>): Enrollment {
  return {
    id: r.id,
    accountId: r.account_id,
    maxPhones: r.max_phones,
    used: r.used,
    labels: r.labels ?? {},
    namePrefix: r.name_prefix,
    expiresAt: r.expires_at,
    revokedAt: r.revoked_at,
    createdAt: r.created_at,
  };
}

/** Phones per credential_revoked journal entry of a fleet key (a bounded event size). */
const REVOKED_CHUNK = 500;

export class KyselyFleetStore implements FleetStore {
  constructor(private readonly db: Kysely<DB>) {}

  async updateLabels(
    deviceId: string,
    change: { set: Record<string, string>; remove: string[]; max?: number },
    accountId?: string,
  ): Promise<
    { ok: true; labels: Record<string, string> } | { ok: false; error: 'no_device' | 'too_many'; count?: number }
  > {
    return this.db.transaction().execute(async (trx) => {
      // The row is locked while the result is counted, so concurrent changes cannot pass the cap together.
      let q = trx.selectFrom('devices').select('labels').where('id', '=', deviceId).forUpdate();
      if (accountId !== undefined) q = q.where('account_id', '=', accountId);
      const row = await q.executeTakeFirst();
      if (!row) return { ok: false as const, error: 'no_device' as const };
      const now = row.labels ?? {};
      const next = { ...now, ...change.set };
      for (const k of change.remove) delete next[k];
      const count = Object.keys(next).length;
      if (change.max !== undefined && count > change.max && count > Object.keys(now).length)
        return { ok: false as const, error: 'too_many' as const, count };
      const r = await trx
        .updateTable('devices')
        .set({ labels: sql`(labels || ${JSON.stringify(change.set)}::jsonb) - ${change.remove}::text[]` as never })
        .where('id', '=', deviceId)
        .returning('labels')
        .executeTakeFirstOrThrow();
      return { ok: true as const, labels: r.labels ?? {} };
    });
  }

  async getDevice(id: string): Promise<LabelledDevice | undefined> {
    const r = await this.db.selectFrom('devices').selectAll().where('id', '=', id).executeTakeFirst();
    return r && toLabelledDevice(r);
  }

  async listDevices(filter: {
    accountId?: string;
    contains?: Record<string, string>;
    afterId?: string;
    limit?: number;
  }): Promise<LabelledDevice[]> {
    let q = this.db.selectFrom('devices').selectAll();
    if (filter.accountId !== undefined) q = q.where('account_id', '=', filter.accountId);
    if (filter.contains && Object.keys(filter.contains).length > 0)
      q = q.where(sql<boolean>`labels @> ${JSON.stringify(filter.contains)}::jsonb`);
    if (filter.afterId !== undefined) q = q.where('id', '>', filter.afterId);
    q = q.orderBy('id');
    if (filter.limit !== undefined) q = q.limit(filter.limit);
    return (await q.execute()).map(toLabelledDevice);
  }

  async createKey(input: {
    id: string;
    accountId: string;
    hash: string;
    scopes: Scope[];
    selector: string;
  }): Promise<{ ok: true; key: FleetKey } | { ok: false; error: 'limit_reached' | 'no_account' }> {
    return this.db.transaction().execute(async (trx) => {
      // The same lock createToken takes: the key cap holds under concurrency across both kinds.
      const account = await lockAccountCaps(trx, input.accountId);
      if (!account) return { ok: false as const, error: 'no_account' as const };
      if (await atKeyCap(trx, input.accountId, account.max_keys))
        return { ok: false as const, error: 'limit_reached' as const };
      const row = await trx
        .insertInto('fleet_keys')
        .values({
          id: input.id,
          account_id: input.accountId,
          hash: input.hash,
          scopes: [...input.scopes],
          selector: input.selector,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { ok: true as const, key: toKey(row) };
    });
  }

  async findKeyByHash(hash: string): Promise<FleetKey | undefined> {
    const r = await this.db.selectFrom('fleet_keys').selectAll().where('hash', '=', hash).executeTakeFirst();
    return r && toKey(r);
  }

  async getKey(id: string): Promise<FleetKey | undefined> {
    const r = await this.db.selectFrom('fleet_keys').selectAll().where('id', '=', id).executeTakeFirst();
    return r && toKey(r);
  }

  async listKeys(accountId?: string): Promise<FleetKey[]> {
    let q = this.db.selectFrom('fleet_keys').selectAll();
    if (accountId !== undefined) q = q.where('account_id', '=', accountId);
    return (await q.orderBy('created_at').orderBy('id').execute()).map(toKey);
  }

  async recordKeyUse(keyId: string, deviceId: string): Promise<void> {
    // A key revoked (or a phone removed) meanwhile: nothing to remember.
    await sql`insert into fleet_key_devices (key_id, device_id)
      select k.id, d.id from fleet_keys k, devices d where k.id = ${keyId} and d.id = ${deviceId}
      on conflict do nothing`.execute(this.db);
  }

  async revokeKey(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const used = await trx.deleteFrom('fleet_key_devices').where('key_id', '=', id).returning('device_id').execute();
      // Its allocations go with it (the foreign key cascades): those phones are back in the pool.
      const r = await trx.deleteFrom('fleet_keys').where('id', '=', id).executeTakeFirst();
      if (r.numDeletedRows === 0n) return false;
      await journal(trx, { type: 'token_revoked', tokenId: id });
      // The phones it was used on release what it held (leases, tasks), as for a device key.
      for (let i = 0; i < used.length; i += REVOKED_CHUNK)
        await journal(trx, {
          type: 'credential_revoked',
          credential: id,
          deviceIds: used.slice(i, i + REVOKED_CHUNK).map((u) => u.device_id),
        });
      return true;
    });
  }

  async allocate(input: {
    id: string;
    deviceId: string;
    accountId: string;
    keyId: string;
    expiresAt: Date;
    now: Date;
  }): Promise<Allocation | undefined> {
    // Insert, or take over a row whose allocation has expired; a live holder's row is left
    // alone and nothing is returned. Postgres locks the conflicting row for the update, so of
    // any number of concurrent tries on one phone exactly one sees it free.
    // The phone is remembered as used by the key in the same statement (recordKeyUse), so the
    // holder's calls need no write of their own.
    const { rows } = await sql<Selectable<AllocationsTable>>`
      with taken as (
        insert into allocations (id, device_id, account_id, key_id, expires_at, created_at)
        select ${input.id}, d.id, d.account_id, ${input.keyId}, ${input.expiresAt}, ${input.now}
          from devices d where d.id = ${input.deviceId} and d.account_id = ${input.accountId}
        on conflict (device_id) do update
          set id = excluded.id, key_id = excluded.key_id, expires_at = excluded.expires_at,
              created_at = excluded.created_at, account_id = excluded.account_id
          where allocations.expires_at <= ${input.now}
        returning *
      ), used as (
        insert into fleet_key_devices (key_id, device_id) select key_id, device_id from taken
        on conflict do nothing
      )
      select * from taken`.execute(this.db);
    return rows[0] && toAllocation(rows[0]);
  }

  async freeDevices(
    accountId: string,
    labels: readonly LabelRequirement[],
    now: Date,
    limit: number,
    range?: { after?: string; before?: string },
  ): Promise<DeviceLabels[]> {
    let q = this.db
      .selectFrom('devices as d')
      .leftJoin('allocations as a', (j) => j.onRef('a.device_id', '=', 'd.id').on('a.expires_at', '>', now))
      .select(['d.id', 'd.account_id', 'd.labels', FACT_SOURCES.as('facts')])
      .where('d.account_id', '=', accountId)
      .where('a.device_id', 'is', null);
    for (const c of labelConditions(labels)) q = q.where(c);
    if (range?.after !== undefined) q = q.where('d.id', '>', range.after);
    if (range?.before !== undefined) q = q.where('d.id', '<', range.before);
    const rows = await q
      .orderBy(range ? sql`d.id` : sql`random()`)
      .limit(limit)
      .execute();
    return rows.map(toDeviceLabels);
  }

  async deviceAccess(
    deviceId: string,
    now: Date,
  ): Promise<{ device: DeviceLabels; allocation: { id: string; keyId: string } | null } | undefined> {
    const r = await this.db
      .selectFrom('devices as d')
      .leftJoin('allocations as a', (j) => j.onRef('a.device_id', '=', 'd.id').on('a.expires_at', '>', now))
      .select(['d.id', 'd.account_id', 'd.labels', FACT_SOURCES.as('facts'), 'a.id as allocation_id', 'a.key_id'])
      .where('d.id', '=', deviceId)
      .executeTakeFirst();
    return (
      r && {
        device: toDeviceLabels(r),
        allocation: r.allocation_id !== null && r.key_id !== null ? { id: r.allocation_id, keyId: r.key_id } : null,
      }
    );
  }

  async allocationOfDevice(deviceId: string, now: Date): Promise<Allocation | undefined> {
    const r = await this.db
      .selectFrom('allocations')
      .selectAll()
      .where('device_id', '=', deviceId)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return r && toAllocation(r);
  }

  async getAllocation(id: string, now: Date): Promise<Allocation | undefined> {
    const r = await this.db
      .selectFrom('allocations')
      .selectAll()
      .where('id', '=', id)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return r && toAllocation(r);
  }

  async allocatedDevices(accountId: string, now: Date): Promise<Set<string>> {
    const rows = await this.db
      .selectFrom('allocations')
      .select('device_id')
      .where('account_id', '=', accountId)
      .where('expires_at', '>', now)
      .execute();
    return new Set(rows.map((r) => r.device_id));
  }

  async listAllocations(filter: { accountId?: string; keyId?: string }, now: Date): Promise<Allocation[]> {
    let q = this.db.selectFrom('allocations').selectAll().where('expires_at', '>', now);
    if (filter.accountId !== undefined) q = q.where('account_id', '=', filter.accountId);
    if (filter.keyId !== undefined) q = q.where('key_id', '=', filter.keyId);
    return (await q.orderBy('id').execute()).map(toAllocation);
  }

  async renewAllocation(id: string, keyId: string, expiresAt: Date, now: Date): Promise<Allocation | undefined> {
    const r = await this.db
      .updateTable('allocations')
      // A new term: the next renewal without a length repeats this one, not the whole time held.
      .set({ expires_at: expiresAt, created_at: now })
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('expires_at', '>', now)
      .returningAll()
      .executeTakeFirst();
    return r && toAllocation(r);
  }

  async releaseAllocation(id: string, keyId: string, now: Date): Promise<boolean> {
    // An expired row is left alone: it is free already, and the next allocation takes it over.
    const r = await this.db
      .deleteFrom('allocations')
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  async nextAllocationExpiry(accountId: string, now: Date): Promise<Date | undefined> {
    const r = await this.db
      .selectFrom('allocations')
      .select((eb) => eb.fn.min<Date>('expires_at').as('at'))
      .where('account_id', '=', accountId)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return r?.at ?? undefined;
  }

  async countAllocations(now: Date): Promise<number> {
    const r = await this.db
      .selectFrom('allocations')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('expires_at', '>', now)
      .executeTakeFirstOrThrow();
    return Number(r.n);
  }

  async createEnrollment(input: {
    id: string;
    accountId: string;
    codeHash: string;
    maxPhones: number;
    labels: Record<string, string>;
    namePrefix: string | null;
    expiresAt: Date;
  }): Promise<Enrollment> {
    const r = await this.db
      .insertInto('enrollments')
      .values({
        id: input.id,
        account_id: input.accountId,
        code_hash: input.codeHash,
        max_phones: input.maxPhones,
        labels: JSON.stringify(input.labels),
        name_prefix: input.namePrefix,
        expires_at: input.expiresAt,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toEnrollment(r);
  }

  async listEnrollments(accountId?: string): Promise<Enrollment[]> {
    let q = this.db.selectFrom('enrollments').selectAll();
    if (accountId !== undefined) q = q.where('account_id', '=', accountId);
    return (await q.orderBy('created_at').orderBy('id').execute()).map(toEnrollment);
  }

  async getEnrollment(id: string): Promise<Enrollment | undefined> {
    const r = await this.db.selectFrom('enrollments').selectAll().where('id', '=', id).executeTakeFirst();
    return r && toEnrollment(r);
  }

  async revokeEnrollment(id: string, now: Date): Promise<boolean> {
    const r = await this.db
      .updateTable('enrollments')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }
}
