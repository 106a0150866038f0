// CLI commands and serve sharing serve's embedded PGlite socket each get their own answers.
// Decision 0011 (docs/decisions/0011-embedded-store-over-unix-socket.md): "**Every** process,
// `serve` included, then talks Postgres through `pg`" to `<dataDir>/.s.PGSQL.5432`, and
// pglite-socket "multiplexes every connection onto PGlite's single session" with "one
// transaction at a time across all connections and processes". So connections working at the
// same time (each a CLI process: connect, a transaction or a query, end) must never receive
// pieces of each other's answers: one connection's exchange runs to its ReadyForQuery before
// another's starts (src/store/database/session-queue.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import pg from 'pg';
import { cliResult as pb, startChild, type Child } from '../helpers/processes.ts';
import { tempDir } from '../helpers/relay.ts';

let serve: Child;
let data: string;
beforeAll(async () => {
  data = tempDir('pb-shared-');
  serve = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', data]);
  await serve.ready;
}, 120_000);
afterAll(async () => {
  await serve?.kill('SIGKILL');
  rmSync(data, { recursive: true, force: true });
});

describe("CLI processes sharing serve's PGlite socket", () => {
  it('concurrent commands (what each CLI process does: connect, a transaction or a query, end) get their own answers', async () => {
    const cfg = { host: data, port: 5432, user: 'postgres', database: 'postgres', ssl: false };
    let wrong = 0;
    let ok = 0;
    const errors = new Set<string>();
    // Six "commands" at once: half run a short transaction (as migrate() and every store write
    // do), half a single parameterised query (as a read does), each on its own connection.
    const command = async (i: number, r: number) => {
      const c = new pg.Client({ ...cfg, connectionTimeoutMillis: 10_000, query_timeout: 10_000 });
      c.on('error', () => {});
      try {
        await c.connect();
        if (i % 2) {
          await c.query('begin');
          const a = await c.query('select $1::int + $2::int + $3::int as v', [r, i, 1]);
          if (a.rows[0]?.v !== r + i + 1) wrong++;
          await c.query('select pg_advisory_xact_lock(42)');
          await c.query('commit');
        } else {
          const a = await c.query('select $1::text as v', [`c${i}r${r}`]);
          if (a.rows[0]?.v !== `c${i}r${r}`) wrong++;
        }
        ok++;
      } catch (err) {
        errors.add((err as Error).message);
      } finally {
        await c.end().catch(() => {});
      }
    };
    await Promise.all(
      [0, 1, 2, 3, 4, 5].map(async (i) => {
        for (let r = 0; r < 15; r++) await command(i, r);
      }),
    );
    expect({ wrong, errors: [...errors] }).toEqual({ wrong: 0, errors: [] });
    expect(ok).toBe(90);
  }, 120_000);

  it('a phonebridge command run while other clients of the socket work gets its own answer', async () => {
    const cfg = { host: data, port: 5432, user: 'postgres', database: 'postgres', ssl: false };
    // Other CLI processes at work (each: connect, a short transaction, end), until the commands are done.
    let stop = false;
    const other = async (i: number) => {
      while (!stop) {
        const c = new pg.Client({ ...cfg, connectionTimeoutMillis: 10_000, query_timeout: 10_000 });
        c.on('error', () => {});
        try {
          await c.connect();
          await c.query('begin');
          for (let q = 0; q < 5; q++) await c.query('select $1::int as v', [i]);
          await c.query('commit');
          await c.query('select $1::text as v', [String(i)]);
        } catch {
          // not what this test looks at
        } finally {
          await c.end().catch(() => {});
        }
      }
    };
    const noise = Promise.all([1, 2, 3, 4, 5, 6].map(other));
    let results: Array<{ code: number | null; stdout: string; stderr: string }>;
    try {
      // Five commands at once, each its own process and connection, beside the others.
      results = await Promise.all(
        [0, 1, 2, 3, 4].map((i) =>
          pb([
            'enroll',
            'create',
            '--max-phones',
            '3',
            '--expires',
            '1h',
            '--labels',
            `n=${i}`,
            '--json',
            '--data-dir',
            data,
          ]),
        ),
      );
    } finally {
      stop = true;
      await noise;
    }
    expect(results.filter((r) => r.code !== 0).map((r) => r.stderr)).toEqual([]);
  }, 400_000);
});
