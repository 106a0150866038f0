import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// What the relay keeps of a removed device, so its phone coming back later is told it was
// removed (4004) rather than unauthorised (4003): the id, the public key its signature is
// checked against, the account and when (docs/decisions/0230-removed-devices-are-remembered.md).
// No foreign key: the device row is gone by design. Purged after REMOVED_DEVICE_RETENTION_MS.
export const migration006: Migration = {
  version: 6,
  release: '0.2.0',
  name: 'removed_devices',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    await sql`create table removed_devices (
      id text primary key,
      account_id text not null,
      public_key text not null,
      removed_at timestamptz not null default now()
    )`.execute(db);
    await sql`create index removed_devices_removed_at_idx on removed_devices (removed_at)`.execute(db);
  },
};
