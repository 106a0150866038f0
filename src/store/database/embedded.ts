// The embedded default: PGlite 0.5 in the data dir, served over a Unix socket by pglite-socket so
// that `serve`, the CLI and any helper process all talk plain Postgres through `pg`
// (docs/decisions/0011-embedded-store-over-unix-socket.md).
//
// Rules this file enforces:
// - PGlite is opened by at most one process per data dir, guarded by `<dataDir>/.pglite.lock`
//   (one lock for both roles, so a starting `serve` and a CLI command cannot both win).
// - `serve` publishes `<dataDir>/.s.PGSQL.5432`; a CLI command uses it when it answers, otherwise
//   it opens the directory itself and serves it on a private socket in `<dataDir>/.cli/`.
// - A socket file or lock file left by a crashed process is detected (nothing answers / dead pid)
//   and removed; so is a pgdata whose creation it cut off (CREATING_MARKER).
//
// pglite-socket multiplexes every connection onto PGlite's single backend session, one
// connection's exchange at a time (session-queue.ts). Consequences the rest of the code relies on
// or must respect:
// - One transaction at a time across all connections and processes: while one is open, queries
//   from other connections wait. Inside a transaction, never await work on another connection.
// - Session state (SET, session advisory locks, temp tables, LISTEN) is shared by everyone.
//   Locks must be transaction-scoped (pg_advisory_xact_lock), which the serialisation makes exact.
import process from 'node:process';
import { Buffer } from 'node:buffer';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { chmodSync, existsSync, lstatSync, mkdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { DataDirPathError } from './data-dir-error.ts';
import { DataDirBusyError, readLock, tryLock, type LockInfo } from './lock.ts';
import { useSessionQueue, type SessionQueue } from './session-queue.ts';
import { copyTemplate, emptyDir, isFreshDataDir } from './template.ts';
import type { DatabaseSource } from './types.ts';

export { DataDirBusyError } from './lock.ts';

const PORT = 5432;
const SOCKET_NAME = `.s.PGSQL.${PORT}`;
export const LOCK_FILE = '.pglite.lock';
/** Private socket directory used while a CLI command holds PGlite itself. */
export const CLI_SOCKET_DIR = '.cli';
/** sun_path is 108 bytes on Linux, 104 on macOS (including the NUL). */
const MAX_SOCKET_PATH = 103;
// pglite-socket's default is 1 and it answers a surplus connection with a plain-text line that
// `pg` reports as a protocol error, so leave plenty of room for several processes' pools.
const MAX_CONNECTIONS = 64;
// A connection silent this long is closed by the server, rolling back any transaction it left
// open (otherwise a hung client would block every process). pg.Pool closes idle clients after
// 10 s by default, well before this.
const IDLE_TIMEOUT_MS = 60_000;

export interface EmbeddedOptions {
  /** How long to wait for another process's lock to go away (or its socket to answer). Default 10 s. */
  waitMs?: number;
  /** Where the prepared data dir is looked for (template.ts); default node_modules/.cache/phonebridge. */
  templateDir?: string;
}

function pgConfigFor(socketDir: string): pg.PoolConfig {
  // ssl: false explicitly, or a PGSSLMODE=require meant for a real database would make pg demand
  // TLS from pglite-socket, which refuses it.
  return { host: socketDir, port: PORT, user: 'postgres', database: 'postgres', ssl: false };
}

function prepareDataDir(dataDir: string): string {
  const dir = resolve(dataDir);
  const socketPath = join(dir, CLI_SOCKET_DIR, SOCKET_NAME); // the longer of the two socket paths
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
    throw new DataDirPathError(
      `--data-dir ${dir} is too long for a Unix socket inside it (${socketPath} is ${Buffer.byteLength(socketPath)} bytes, at most ${MAX_SOCKET_PATH}); use a shorter path`,
    );
  }
  // The socket has no authentication: the directory's mode is the access control.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** True if a Postgres server answers `select 1` on `<socketDir>/.s.PGSQL.5432`. */
export async function socketAnswers(socketDir: string, timeoutMs = 2000): Promise<boolean> {
  if (!isSocketFile(join(socketDir, SOCKET_NAME))) return false;
  const client = new pg.Client({
    ...pgConfigFor(socketDir),
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

function isSocketFile(path: string): boolean {
  try {
    return lstatSync(path).isSocket();
  } catch {
    return false;
  }
}

/** Called only while holding the lock, so any socket file there is a crashed process's leftover. */
function removeStaleSocket(path: string): void {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!st.isSocket()) throw new Error(`${path} exists and is not a socket; remove it by hand`);
  unlinkSync(path);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function busyMessage(dataDir: string, holder: LockInfo): string {
  if (holder.role === 'serve') {
    return `${dataDir} is held by phonebridge serve (pid ${holder.pid}), but its socket does not answer; wait until it has started, or stop it`;
  }
  return `${dataDir} is in use by another phonebridge command (pid ${holder.pid}); try again when it has finished`;
}

/**
 * Present while a new `pgdata` is being made, removed once PGlite has opened it complete. A
 * `pgdata` found next to it was cut off half-made (a kill -9, a SIGTERM before ready) and never
 * starts ("PGlite failed to initialize properly"), so it is made again. A marker rather than
 * making it in a sibling directory renamed into place: PGlite cannot follow its data dir to a
 * new path, so that would cost a close and a second open (about a second) on every first start.
 * A `pgdata` without a marker and with PG_VERSION (any made before the marker existed too) is complete.
 */
const CREATING_MARKER = 'pgdata.creating';

/**
 * Opens PGlite on `<dataDir>/pgdata`; a new one starts as a copy of the prepared template (initdb
 * and every migration done) when there is one. The caller holds the lock.
 */
async function openPglite(dataDir: string, templateDir?: string): Promise<PGlite> {
  const pgdata = join(dataDir, 'pgdata');
  const marker = join(dataDir, CREATING_MARKER);
  if (!existsSync(marker) && !isFreshDataDir(pgdata)) {
    chmodSync(pgdata, 0o700);
    return PGlite.create({ dataDir: pgdata });
  }
  writeFileSync(marker, `${process.pid}\n`, { mode: 0o600 });
  rmSync(pgdata, { recursive: true, force: true });
  mkdirSync(pgdata, { mode: 0o700 });
  const db = await createPglite(pgdata, templateDir);
  unlinkSync(marker);
  return db;
}

async function createPglite(pgdata: string, templateDir?: string): Promise<PGlite> {
  try {
    if (copyTemplate(pgdata, templateDir)) return await PGlite.create({ dataDir: pgdata });
  } catch {
    // A damaged template: fall back to initdb in an emptied dir.
    emptyDir(pgdata);
  }
  return PGlite.create({ dataDir: pgdata });
}

/** Opens PGlite on `<dataDir>/pgdata` and serves it on `<socketDir>/.s.PGSQL.5432`. The caller holds the lock. */
async function openAndServe(
  dataDir: string,
  socketDir: string,
  release: () => void,
  label: string,
  templateDir?: string,
): Promise<DatabaseSource> {
  let db: PGlite | undefined;
  let server: PGLiteSocketServer | undefined;
  let queue: SessionQueue;
  try {
    mkdirSync(socketDir, { recursive: true, mode: 0o700 });
    const socketPath = join(socketDir, SOCKET_NAME);
    removeStaleSocket(socketPath);
    db = await openPglite(dataDir, templateDir);
    server = new PGLiteSocketServer({
      db,
      path: socketPath,
      maxConnections: MAX_CONNECTIONS,
      idleTimeout: IDLE_TIMEOUT_MS,
    });
    // One connection's exchange at a time on PGlite's single session (session-queue.ts).
    queue = useSessionQueue(server, db);
    await server.start();
  } catch (err) {
    await server?.stop().catch(() => {});
    await db?.close().catch(() => {});
    release();
    throw err;
  }
  const openDb = db;
  const openServer = server;
  let closing: Promise<void> | undefined;
  return {
    kind: 'embedded',
    pgConfig: pgConfigFor(socketDir),
    label,
    changeCount: () => queue.changes,
    close: () =>
      (closing ??= (async () => {
        try {
          // Stop first: it disconnects every client (rolling back their open transactions)
          // before PGlite goes away.
          await openServer.stop();
          await openDb.close();
        } finally {
          release();
        }
      })()),
  };
}

async function acquire(
  dataDir: string,
  role: LockInfo['role'],
  waitMs: number,
  onHeld: (holder: LockInfo) => Promise<DatabaseSource | 'wait'>,
): Promise<{ release: () => void } | DatabaseSource> {
  const lockPath = join(dataDir, LOCK_FILE);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const attempt = tryLock(lockPath, role);
    if (attempt.ok) return { release: attempt.release };
    const next = await onHeld(attempt.holder);
    if (next !== 'wait') return next;
    if (Date.now() >= deadline)
      throw new DataDirBusyError(dataDir, attempt.holder, busyMessage(dataDir, attempt.holder));
    await sleep(100);
  }
}

/**
 * For `phonebridge serve`: opens PGlite and publishes it on `<dataDir>/.s.PGSQL.5432`.
 * The returned source's pgConfig points at that socket, so serve uses it like everyone else.
 */
export async function serveEmbedded(dataDir: string, options: EmbeddedOptions = {}): Promise<DatabaseSource> {
  const dir = prepareDataDir(dataDir);
  const alreadyServed = (holder?: LockInfo) =>
    new DataDirBusyError(
      dir,
      holder ?? readLock(join(dir, LOCK_FILE)) ?? { pid: 0, role: 'serve', startedAt: '' },
      `phonebridge serve is already running on ${dir}${holder?.pid ? ` (pid ${holder.pid})` : ''}`,
    );
  if (await socketAnswers(dir)) throw alreadyServed();
  // eslint-disable-next-line @typescript-eslint/require-await -- onHeld returns a promise (the CLI's handler waits)
  const got = await acquire(dir, 'serve', options.waitMs ?? 10_000, async (holder) => {
    // Another serve (running or starting) never gives way; a CLI command soon will.
    if (holder.role === 'serve') throw alreadyServed(holder);
    return 'wait';
  });
  if ('kind' in got) return got;
  return openAndServe(
    dir,
    dir,
    got.release,
    `embedded PGlite in ${dir} (serving ${join(dir, SOCKET_NAME)})`,
    options.templateDir,
  );
}

/**
 * For CLI commands: the running serve's socket if it answers, otherwise the data dir itself
 * under the lock (served on a private socket for the duration of the command).
 */
export async function openEmbeddedForCli(dataDir: string, options: EmbeddedOptions = {}): Promise<DatabaseSource> {
  const dir = prepareDataDir(dataDir);
  const viaServe = (): DatabaseSource => ({
    kind: 'embedded',
    pgConfig: pgConfigFor(dir),
    label: `embedded PGlite in ${dir} (via the running serve)`,
    close: async () => {},
  });
  if (await socketAnswers(dir)) return viaServe();
  const got = await acquire(dir, 'cli', options.waitMs ?? 10_000, async () =>
    // Whoever holds it may be a serve that is still opening PGlite: check its socket again.
    (await socketAnswers(dir)) ? viaServe() : 'wait',
  );
  if ('kind' in got) return got;
  return openAndServe(
    dir,
    join(dir, CLI_SOCKET_DIR),
    got.release,
    `embedded PGlite in ${dir} (opened by this command)`,
    options.templateDir,
  );
}
