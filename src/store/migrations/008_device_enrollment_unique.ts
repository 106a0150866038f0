import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// One enrollment code's key is one phone, enforced by the database: two copies of one phone's
// pairing racing each other could otherwise both pass the statement's "no device of this code
// with this key yet" check (each reads before the other commits) and take two slots
// (docs/decisions/0238-a-pairing-repeated-by-its-phone.md). A database that already holds such
// twins keeps them as devices; only the oldest stays linked to its enrollment, so a repeat finds
// that one. The non-unique index of 007 serves the same reads; dropping it is a later contract step.
export const migration008: Migration = {
  version: 8,
  release: '0.2.0',
  name: 'device_enrollment_unique',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    await sql`update devices set enrollment_id = null
       where enrollment_id is not null
         and id not in (
           select distinct on (enrollment_id, public_key) id from devices
            where enrollment_id is not null
            order by enrollment_id, public_key, created_at, id)`.execute(db);
    await sql`create unique index devices_enrollment_key_unique on devices (enrollment_id, public_key)
      where enrollment_id is not null`.execute(db);
  },
};
