import { openEmbeddedForCli, serveEmbedded, type EmbeddedOptions } from './embedded.ts';
import { postgresSource } from './postgres.ts';
import type { DatabaseSource } from './types.ts';

export type { DatabaseSource } from './types.ts';
export {
  DataDirBusyError,
  openEmbeddedForCli,
  serveEmbedded,
  socketAnswers,
  type EmbeddedOptions,
} from './embedded.ts';
export { DatabaseUrlError, postgresSource, redactDatabaseUrl } from './postgres.ts';

export interface OpenDatabaseOptions extends EmbeddedOptions {
  /** postgres://… ; absent → embedded PGlite in dataDir. */
  databaseUrl?: string | null;
  dataDir: string;
  /** 'server' publishes the embedded database; 'cli' joins it, or opens the dir itself under the lock. */
  role: 'server' | 'cli';
}

/** Picks the backend once; everything after this only sees a pg.PoolConfig. */
export function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseSource> {
  if (options.databaseUrl) return Promise.resolve(postgresSource(options.databaseUrl));
  return options.role === 'server'
    ? serveEmbedded(options.dataDir, options)
    : openEmbeddedForCli(options.dataDir, options);
}
