// A freshly initialized PGlite cluster, kept as a tarball so that a new data dir starts from a
// copy instead of running initdb (about 7 s of WASM on the 2-core dev VM, against ~2 s to
// unpack the copy). `npm install`/`npm ci` build it once (the `prepare` script); without it —
// scripts disabled, or a PGlite upgrade not yet prepared — a new data dir runs initdb as before.
// The file name carries the PGlite version: a template is only ever used by the PGlite that made it.
import { PGlite } from '@electric-sql/pglite';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CACHE_DIR = fileURLToPath(new URL('../../../node_modules/.cache/phonebridge/', import.meta.url));

function pgliteVersion(): string {
  // Its exports map hides package.json: walk up from the entry point instead.
  let dir = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === '@electric-sql/pglite' && pkg.version) return pkg.version;
    }
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the version of @electric-sql/pglite');
    dir = up;
  }
}

/** Where the template for the installed PGlite lives (it may not exist). */
export function templatePath(cacheDir = CACHE_DIR): string {
  return join(cacheDir, `pglite-${pgliteVersion()}-initdb.tar.gz`);
}

/** A data dir PGlite has never initialized (no PG_VERSION yet). */
export function isFreshDataDir(pgdata: string): boolean {
  return !existsSync(join(pgdata, 'PG_VERSION'));
}

/** The template's bytes, if one was prepared for this PGlite. */
export function readTemplate(cacheDir = CACHE_DIR): Blob | undefined {
  const path = templatePath(cacheDir);
  return existsSync(path) ? new Blob([readFileSync(path)]) : undefined;
}

/** Empties a data dir that a failed start left half-written, so initdb can run in it. */
export function emptyDir(dir: string): void {
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
}

/** Runs initdb once in a scratch dir and keeps the result; returns the template's path. */
export async function buildTemplate(cacheDir = CACHE_DIR): Promise<string> {
  const path = templatePath(cacheDir);
  if (existsSync(path)) return path;
  mkdirSync(cacheDir, { recursive: true });
  const scratch = mkdtempSync(join(cacheDir, 'initdb-'));
  try {
    const db = await PGlite.create({ dataDir: scratch });
    const dump = await db.dumpDataDir('gzip');
    await db.close();
    // Written aside and renamed: a reader never sees half a template.
    const partial = `${path}.${process.pid}.partial`;
    writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
    renameSync(partial, path);
    return path;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
