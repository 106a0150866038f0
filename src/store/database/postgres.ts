import type { DatabaseSource } from './types.ts';

/** A --database-url that is no Postgres URL: the relay cannot start on it (serve exits 2). */
export class DatabaseUrlError extends Error {}

/** The URL as logs and errors may show it: the password replaced by ***. */
export function redactDatabaseUrl(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(not a URL)';
  }
}

/** A real PostgreSQL server reached by URL. Nothing to open or close beyond the pool the store makes. */
export function postgresSource(databaseUrl: string): DatabaseSource {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    throw new DatabaseUrlError('--database-url is not a valid URL (expected postgres://user@host:port/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new DatabaseUrlError(`--database-url must start with postgres:// (got ${url.protocol}//)`);
  }
  return {
    kind: 'postgres',
    pgConfig: { connectionString: databaseUrl },
    label: `postgres ${redactDatabaseUrl(databaseUrl)}`,
    close: async () => {},
  };
}
