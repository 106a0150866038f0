import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// Fleets (docs/decisions/0170-fleet-model.md): labels on devices, account-scoped fleet keys with
// a selector, exclusive allocations of phones (docs/decisions/0171-allocation-atomicity.md) and
// enrollment codes that pair many phones. Secrets appear only as hashes.
export const migration004: Migration = {
  version: 4,
  name: 'fleets',
  release: '0.1.0',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    const statements = [
      sql`alter table devices add column labels jsonb not null default '{}'::jsonb`,
      sql`create table fleet_keys (
        id text primary key,
        account_id text not null references accounts (id) on delete cascade,
        -- SHA-256 of the key; the key itself is never stored
        hash text not null unique,
        scopes text[] not null,
        -- canonical selector text ('' = every phone of the account)
        selector text not null,
        created_at timestamptz not null default now()
      )`,
      sql`create index fleet_keys_account_idx on fleet_keys (account_id, created_at)`,
      // One row per phone at most (the unique device_id): handing a phone out is a conditional
      // upsert on it, so two nodes can never both win the same phone.
      sql`create table allocations (
        id text primary key,
        device_id text not null unique references devices (id) on delete cascade,
        account_id text not null,
        key_id text not null references fleet_keys (id) on delete cascade,
        expires_at timestamptz not null,
        created_at timestamptz not null default now()
      )`,
      sql`create index allocations_key_idx on allocations (key_id)`,
      sql`create table enrollments (
        id text primary key,
        account_id text not null references accounts (id) on delete cascade,
        code_hash text not null unique,
        max_phones integer not null check (max_phones > 0),
        used integer not null default 0,
        labels jsonb not null default '{}'::jsonb,
        name_prefix text,
        expires_at timestamptz not null,
        revoked_at timestamptz,
        created_at timestamptz not null default now()
      )`,
      sql`create index enrollments_account_idx on enrollments (account_id, created_at)`,
    ];
    for (const s of statements) await s.execute(db);
  },
};
