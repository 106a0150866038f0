import type pg from 'pg';

/**
 * Where the database comes from. Every backend ends up as a `pg.PoolConfig`, so the store
 * has one code path: Kysely's PostgresDialect over `pg`
 * (docs/decisions/0011-embedded-store-over-unix-socket.md).
 */
export interface DatabaseSource {
  readonly kind: 'postgres' | 'embedded';
  /** Connection settings for `pg`; for the embedded backend, `host` is a directory holding the Unix socket. */
  readonly pgConfig: pg.PoolConfig;
  /** Human-readable origin for logs; never contains a password. */
  readonly label: string;
  /**
   * Where this process serves the database itself (embedded, opened here), a count that moves
   * each time a statement that may have written completes, whichever process sent it: a reader
   * that saw no move since its last read knows nothing changed (session-queue.ts). Absent where
   * others write without this process seeing it (Postgres, or joining another process's PGlite).
   */
  readonly changeCount?: () => number;
  /** Releases what this source opened (the PGlite instance, its socket and lock). Idempotent. */
  close(): Promise<void>;
}
