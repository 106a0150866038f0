// Our own small runner: numbered migrations applied in one transaction under an advisory lock,
// and a one-row schema_version table (docs/decisions/0002-postgres-store-and-schema-version.md)
// that also records the oldest release that can run on the schema (min_release). Every
// migration leaves the schema usable by the release before it: old nodes keep serving while
// new ones migrate (docs/decisions/0202-migrations-during-a-rolling-upgrade.md).
import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import { SchemaTooNewError } from '../types.ts';
import { migration001 } from './001_initial.ts';
import { migration002 } from './002_control_events.ts';
import { migration003 } from './003_hosted.ts';
import { migration004 } from './004_fleets.ts';
import { migration005 } from './005_fleet_key_devices.ts';
import { migration006 } from './006_removed_devices.ts';
import { migration007 } from './007_device_enrollment.ts';
import { migration008 } from './008_device_enrollment_unique.ts';
import { migration009 } from './009_grant_last_token.ts';
import type { Migration } from './types.ts';

export type { Migration } from './types.ts';

export const MIGRATIONS: readonly Migration[] = [
  migration001,
  migration002,
  migration003,
  migration004,
  migration005,
  migration006,
  migration007,
  migration008,
  migration009,
];
export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

// Arbitrary constant ("phon") so concurrent migrators (several gateways starting at once, the
// migrate job, a CLI command) queue up instead of racing on CREATE TABLE.
const MIGRATE_LOCK_KEY = 0x70686f6e;

export interface MigrateResult {
  from: number;
  to: number;
}

/**
 * Brings the schema to the newest version this build knows. A schema newer than that throws
 * SchemaTooNewError and changes nothing. Safe to call from many processes at once: the
 * transaction-scoped advisory lock serialises them on Postgres, and on PGlite the socket
 * multiplexer runs one transaction at a time anyway (session locks would not work there: every
 * connection shares one session).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- runs before any typed schema exists
export async function migrate(db: Kysely<any>, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrateResult> {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration ${m.name} has version ${m.version}, expected ${i + 1}`);
  });
  const latest = migrations.length;
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATE_LOCK_KEY)})`.execute(trx);
    await sql`create table if not exists schema_version (
      singleton boolean primary key default true check (singleton),
      version integer not null,
      updated_at timestamptz not null default now(),
      min_release text
    )`.execute(trx);
    // Read every column: min_release is absent on a schema only older builds have migrated.
    const row = (await sql<{ version: number; min_release?: string | null }>`select * from schema_version`.execute(trx))
      .rows[0];
    const from = row ? Number(row.version) : 0;
    if (from > latest) throw new SchemaTooNewError(from, latest, row?.min_release ?? undefined);
    // Older builds made the table without it; they ignore the column (they select `version`).
    if (row && row.min_release === undefined)
      await sql`alter table schema_version add column if not exists min_release text`.execute(trx);
    for (const m of migrations) {
      if (m.version > from) await m.up(trx);
    }
    const minRelease = migrations[latest - 1].release;
    if (from !== latest || row?.min_release !== minRelease) {
      const values = { version: latest, updated_at: new Date(), min_release: minRelease };
      await trx
        .insertInto('schema_version')
        .values({ singleton: true, ...values })
        .onConflict((oc) => oc.column('singleton').doUpdateSet(values))
        .execute();
    }
    return { from, to: latest };
  });
}

/** The version recorded in the database, 0 if none. Does not migrate (for readiness checks). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- reads schema_version, outside the typed schema
export async function readSchemaVersion(db: Kysely<any>): Promise<number> {
  try {
    const { rows } = await sql<{ version: number }>`select version from schema_version`.execute(db);
    return rows[0] ? Number(rows[0].version) : 0;
  } catch (err) {
    if ((err as { code?: string }).code === '42P01') return 0; // undefined_table: never migrated
    throw err;
  }
}
