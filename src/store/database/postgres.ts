import type { DatabaseSource } from './types.ts';

/** A real PostgreSQL server reached by URL. Nothing to open or close beyond the pool the store makes. */
export function postgresSource(databaseUrl: string): DatabaseSource {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    throw new Error('--database-url is not a valid URL (expected postgres://user@host:port/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new Error(`--database-url must start with postgres:// (got ${url.protocol}//)`);
  }
  if (url.password) url.password = '***';
  return {
    kind: 'postgres',
    pgConfig: { connectionString: databaseUrl },
    label: `postgres ${url.toString()}`,
    close: async () => {},
  };
}
