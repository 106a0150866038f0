import type { Kysely } from 'kysely';

export interface Migration {
  /** 1, 2, 3…: contiguous, never renumbered, never edited once released. */
  version: number;
  name: string;
  /**
   * The first phonebridge release (package.json `version`) that knows this migration: a schema
   * migrated this far needs that release or newer (schema_version.min_release).
   */
  release: string;
  /** Runs inside the migration transaction (Postgres DDL is transactional). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a migration runs against the schema as it was, not today's typed one
  up(db: Kysely<any>): Promise<void>;
}
