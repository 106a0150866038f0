// A fresh Postgres database for one load test's (or cluster test's) nodes, dropped with its
// connections when the test is done: each run starts from empty tables, and no run reads
// another's rows.
import { randomBytes } from 'node:crypto';

export const PG_ADMIN_URL = process.env.PHONEBRIDGE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** One statement on the admin URL's server, on a connection of its own. */
export async function adminQuery(sql: string): Promise<void> {
  const pg = (await import('pg')).default;
  const c = new pg.Client({ connectionString: PG_ADMIN_URL });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** `CREATE DATABASE <prefix>_<random>` on the admin URL's server; its URL and a drop. */
export async function createDatabase(prefix: string): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
