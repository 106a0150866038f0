import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// Hosted mode (docs/decisions/0070-hosted-accounts-and-oauth.md): accounts get an email; sign-in
// codes, web sessions and the OAuth authorization server's clients, codes, grants and refresh
// tokens. Secrets appear only as hashes. An OAuth access token is an ordinary row of `tokens`
// that names its grant, so revoking the grant (or a device removal) takes its tokens with it.
export const migration003: Migration = {
  version: 3,
  name: 'hosted',
  release: '0.1.0',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    const statements = [
      sql`alter table accounts add column email text`,
      sql`create unique index accounts_email_idx on accounts (email) where email is not null`,
      sql`create table signin_codes (
        code_hash text primary key,
        email text not null,
        -- where to go after sign-in: a path on this relay, never a URL
        next_path text,
        expires_at timestamptz not null,
        used_at timestamptz,
        created_at timestamptz not null default now()
      )`,
      sql`create table web_sessions (
        token_hash text primary key,
        account_id text not null references accounts (id) on delete cascade,
        expires_at timestamptz not null,
        created_at timestamptz not null default now()
      )`,
      sql`create table oauth_clients (
        id text primary key,
        name text not null,
        redirect_uris text[] not null,
        created_at timestamptz not null default now()
      )`,
      sql`create table oauth_grants (
        id text primary key,
        account_id text not null,
        client_id text not null references oauth_clients (id) on delete cascade,
        device_id text not null,
        scopes text[] not null,
        created_at timestamptz not null default now(),
        foreign key (device_id, account_id) references devices (id, account_id) on delete cascade
      )`,
      sql`create index oauth_grants_account_idx on oauth_grants (account_id, created_at)`,
      sql`create table oauth_codes (
        code_hash text primary key,
        client_id text not null references oauth_clients (id) on delete cascade,
        redirect_uri text not null,
        code_challenge text not null,
        resource text not null,
        account_id text not null,
        device_id text not null,
        scopes text[] not null,
        expires_at timestamptz not null,
        used_at timestamptz,
        created_at timestamptz not null default now(),
        foreign key (device_id, account_id) references devices (id, account_id) on delete cascade
      )`,
      sql`create table oauth_refresh_tokens (
        token_hash text primary key,
        grant_id text not null references oauth_grants (id) on delete cascade,
        expires_at timestamptz not null,
        -- set when rotated; presenting it again revokes the grant
        used_at timestamptz,
        created_at timestamptz not null default now()
      )`,
      sql`create index oauth_refresh_grant_idx on oauth_refresh_tokens (grant_id)`,
      sql`alter table tokens add column grant_id text references oauth_grants (id) on delete cascade`,
      sql`create index tokens_grant_idx on tokens (grant_id) where grant_id is not null`,
    ];
    for (const s of statements) await s.execute(db);
  },
};
