import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// When a grant last minted an access token, kept on the grant: the dashboard's "last token" of
// an OAuth connection (docs/HOSTED.md, 5. Token). It was read as the newest of the grant's tokens,
// and the purge deletes tokens an hour after they were minted, so an idle connection showed
// "never". Nullable: the release before inserts grants and mints tokens without it, and the
// dashboard reads the later of the column and the newest token (src/store/hosted-store.ts).
// Filled here from the tokens still there.
export const migration009: Migration = {
  version: 9,
  release: '0.2.0',
  name: 'grant_last_token',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    await sql`alter table oauth_grants add column last_token_at timestamptz`.execute(db);
    await sql`update oauth_grants g set last_token_at = t.m
       from (select grant_id, max(created_at) as m from tokens where grant_id is not null group by grant_id) t
      where t.grant_id = g.id`.execute(db);
  },
};
