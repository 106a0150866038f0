import { postgresSource } from './postgres.ts';
import type { EmbeddedOptions } from './embedded.ts';
import type { DatabaseSource } from './types.ts';

export type { DatabaseSource } from './types.ts';
export type { EmbeddedOptions } from './embedded.ts';
export { DataDirBusyError } from './lock.ts';
export { DataDirPathError } from './data-dir-error.ts';
export { DatabaseUrlError, postgresSource, redactDatabaseUrl } from './postgres.ts';

export interface OpenDatabaseOptions extends EmbeddedOptions {
  /** postgres://… ; absent → embedded PGlite in dataDir. */
  databaseUrl?: string | null;
  dataDir: string;
  /** 'server' publishes the embedded database; 'cli' joins it, or opens the dir itself under the lock. */
  role: 'server' | 'cli';
}

/** Picks the backend once; everything after this only sees a pg.PoolConfig. */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseSource> {
  if (options.databaseUrl) return postgresSource(options.databaseUrl);
  // PGlite is loaded for a data dir only: a node or a command on Postgres starts without it.
  const embedded = await import('./embedded.ts');
  return options.role === 'server'
    ? embedded.serveEmbedded(options.dataDir, options)
    : embedded.openEmbeddedForCli(options.dataDir, options);
}
