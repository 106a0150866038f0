// The store's single entry point: open the database, migrate, ensure the local account.
import { openDatabase, type OpenDatabaseOptions } from './database/index.ts';
import type { DatabaseSource } from './database/types.ts';
import { createStore, type CreateStoreOptions } from './kysely-store.ts';
import { LOCAL_ACCOUNT_ID, type Store } from './types.ts';

export * from './types.ts';
export type { DatabaseSource } from './database/types.ts';
export {
  DatabaseUrlError,
  DataDirBusyError,
  DataDirPathError,
  openDatabase,
  postgresSource,
  redactDatabaseUrl,
  type OpenDatabaseOptions,
} from './database/index.ts';
export { LATEST_SCHEMA_VERSION, migrate, readSchemaVersion, type MigrateResult } from './migrations/index.ts';
export { createStore, type CreateStoreOptions } from './kysely-store.ts';

export interface OpenStore {
  store: Store;
  source: DatabaseSource;
  /** Closes the store's pool, then the source (for embedded serve: the socket and PGlite). */
  close(): Promise<void>;
}

/**
 * Opens the database for `role` ('server' publishes the embedded database, 'cli' joins it or
 * opens the directory under the lock), migrates it and makes sure the local account exists.
 * Throws SchemaTooNewError if the database was migrated by a newer phonebridge, and
 * DataDirBusyError if another process holds the embedded data dir.
 */
export async function openStore(options: OpenDatabaseOptions & CreateStoreOptions): Promise<OpenStore> {
  const source = await openDatabase(options);
  let store: Store;
  try {
    store = await createStore(source, options);
    // Self-hosted relays own everything under this account, with no plan limits.
    await store.ensureAccount(LOCAL_ACCOUNT_ID);
  } catch (err) {
    await source.close().catch(() => {});
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    store,
    source,
    close: () =>
      (closing ??= (async () => {
        try {
          await store.close();
        } finally {
          await source.close();
        }
      })()),
  };
}
export * from './fleet-types.ts';
