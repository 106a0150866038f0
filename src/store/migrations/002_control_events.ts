import { sql } from '../kysely.ts';
import type { Kysely } from 'kysely';
import type { Migration } from './types.ts';

// A journal of invalidations (device removed, token revoked, plan locked) written in the same
// transaction as the change. Every node tails it, so a change made by the CLI — a separate
// process with no bus — reaches every node within a poll interval
// (docs/decisions/0003-announcements-reach-every-node.md).
export const migration002: Migration = {
  version: 2,
  name: 'control_events',
  release: '0.1.0',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  async up(db: Kysely<any>) {
    await sql`create table control_events (
      id bigserial primary key,
      event jsonb not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  },
};
