import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// Which enrollment code paired a phone, so that the phone asking again with the same code and
// key (its answer was lost) gets that device back instead of a second one and a second slot
// (docs/decisions/0238-a-pairing-repeated-by-its-phone.md). Null for every other device, and for
// phones a release before this one enrolled: those are paired anew, as before.
export const migration007: Migration = {
  version: 7,
  release: '0.2.0',
  name: 'device_enrollment',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    await sql`alter table devices add column enrollment_id text`.execute(db);
    await sql`create index devices_enrollment_key_idx on devices (enrollment_id, public_key)
      where enrollment_id is not null`.execute(db);
  },
};
