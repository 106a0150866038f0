import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// The phones each fleet key was used on (docs/decisions/0178-fleet-key-revocation-reaches-phones.md):
// revoking the key tells each of them, so the phone releases what that caller held there.
export const migration005: Migration = {
  version: 5,
  release: '0.2.0',
  name: 'fleet_key_devices',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    await sql`create table fleet_key_devices (
      key_id text not null references fleet_keys (id) on delete cascade,
      device_id text not null references devices (id) on delete cascade,
      primary key (key_id, device_id)
    )`.execute(db);
    await sql`create index fleet_key_devices_device_idx on fleet_key_devices (device_id)`.execute(db);
  },
};
