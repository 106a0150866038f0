// Test backends for the store suite: embedded PGlite in a temp dir, and the real PostgreSQL on
// 127.0.0.1:5432 with a throwaway database per run. Not imported by production code.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openDatabase, type DatabaseSource } from './database/index.ts';

export interface TestBackend {
  readonly name: 'embedded' | 'postgres';
  /** A fresh, empty database. Call once per suite. */
  open(): Promise<DatabaseSource>;
  /** openStore()/openDatabase() options that reach the same database again. */
  reopenOptions(): { databaseUrl?: string; dataDir: string; role: 'server' | 'cli' };
  /** Removes what open() created. The caller closes its stores and source first. */
  cleanup(): Promise<void>;
}

export const TEST_PG_ADMIN_URL =
  process.env.PHONEBRIDGE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export function uid(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

export function tempDataDir(): string {
  // Short path: the Unix socket path inside it must stay under ~100 bytes.
  return mkdtempSync(join(tmpdir(), 'pb-'));
}

export function embeddedBackend(): TestBackend {
  let dir: string | undefined;
  return {
    name: 'embedded',
    async open() {
      dir = tempDataDir();
      // No prepared template: the suite migrates an empty database itself.
      return openDatabase({ dataDir: dir, role: 'server', templateDir: join(dir, 'no-template') });
    },
    reopenOptions: () => ({ dataDir: dir!, role: 'server' }),
    // eslint-disable-next-line @typescript-eslint/require-await -- TestBackend.cleanup returns a promise (the Postgres backend drops a database)
    async cleanup() {
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function postgresBackend(): TestBackend {
  const dbName = `pb_test_${randomBytes(6).toString('hex')}`;
  const url = new URL(TEST_PG_ADMIN_URL);
  url.pathname = `/${dbName}`;
  const dir = tempDataDir(); // unused by the postgres backend, but openStore wants one
  const admin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const c = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  return {
    name: 'postgres',
    async open() {
      await admin((c) => c.query(`create database ${dbName}`));
      return openDatabase({ databaseUrl: url.toString(), dataDir: dir, role: 'server' });
    },
    reopenOptions: () => ({ databaseUrl: url.toString(), dataDir: dir, role: 'server' }),
    async cleanup() {
      await admin((c) => c.query(`drop database if exists ${dbName} with (force)`));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
