import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// Every row carries an account id (hosted mode); self-hosted relays use the 'local' account.
// Secrets appear only as hashes. Later hosted-mode tables (sign-in codes, sessions, OAuth
// clients/codes/refresh tokens) come in later migrations and follow the same two rules.
export const migration001: Migration = {
  version: 1,
  name: 'initial',
  release: '0.1.0',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    const statements = [
      sql`create table accounts (
        id text primary key,
        max_devices integer check (max_devices >= 0),
        max_keys integer check (max_keys >= 0),
        locked boolean not null default false,
        created_at timestamptz not null default now()
      )`,
      sql`create table devices (
        id text primary key,
        account_id text not null references accounts (id) on delete cascade,
        name text not null,
        public_key text not null,
        init_result jsonb,
        last_seen_at timestamptz,
        created_at timestamptz not null default now(),
        -- target of the tokens' composite foreign key below
        unique (id, account_id)
      )`,
      sql`create index devices_account_idx on devices (account_id, created_at)`,
      sql`create table tokens (
        id text primary key,
        account_id text not null references accounts (id) on delete cascade,
        device_id text not null,
        hash text not null unique,
        scopes text[] not null,
        via text not null check (via in ('key', 'oauth')),
        expires_at timestamptz,
        created_at timestamptz not null default now(),
        -- A token is bound to a device of its own account; removing the device removes its tokens.
        foreign key (device_id, account_id) references devices (id, account_id) on delete cascade
      )`,
      sql`create index tokens_device_idx on tokens (device_id)`,
      sql`create index tokens_account_idx on tokens (account_id, created_at)`,
      sql`create index tokens_expires_idx on tokens (expires_at) where expires_at is not null`,
      sql`create table pairing_codes (
        code_hash text primary key,
        account_id text not null references accounts (id) on delete cascade,
        name text,
        expires_at timestamptz not null,
        used_at timestamptz,
        created_at timestamptz not null default now()
      )`,
      sql`create index pairing_codes_expires_idx on pairing_codes (expires_at)`,
    ];
    // One statement per query: the extended protocol pg uses with parameters allows only one.
    for (const s of statements) await s.execute(db);
  },
};
