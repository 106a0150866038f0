// A new embedded data dir starts as a copy of a prepared one: a PGlite cluster that has run
// initdb and every migration of this build, kept as a plain directory. Copying it natively and
// opening the copy costs about 1 s of CPU on the 2-core dev VM, against about 5 s for unpacking
// an initdb tarball into PGlite and migrating, and about 9 s for initdb and migrating from
// nothing (docs/decisions/0252-embedded-data-dir-from-a-migrated-copy.md).
//
// `npm install`/`npm ci` build it once (the `prepare` script, src/store/template-build.ts);
// without it — scripts disabled, a PGlite upgrade or a new migration not yet prepared — a new
// data dir runs initdb and the migrations itself. The directory name carries the PGlite version
// and a fingerprint of the migrations, so a copy is only ever made from a cluster that this
// PGlite made and that these migrations produced.
import { createHash } from 'node:crypto';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LATEST_SCHEMA_VERSION } from '../migrations/index.ts';

const CACHE_DIR = fileURLToPath(new URL('../../../node_modules/.cache/phonebridge/', import.meta.url));
/** Every template name starts with this; older ones are removed when a new one is built. */
export const TEMPLATE_PREFIX = 'pglite-';

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

const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url));

/**
 * What the migrations would make: the bytes of their source files. An edited migration (never
 * done once released, but done while one is written) changes it as surely as a new one.
 */
export function schemaFingerprint(dir = MIGRATIONS_DIR): string {
  const hash = createHash('sha256');
  for (const name of readdirSync(dir).sort())
    if (name.endsWith('.ts') && !name.endsWith('.test.ts'))
      hash.update(`${name}\0`).update(readFileSync(join(dir, name)));
  return hash.digest('hex').slice(0, 12);
}

/** Where the template for the installed PGlite and these migrations lives (it may not exist). */
export function templatePath(cacheDir = CACHE_DIR): string {
  return join(cacheDir, `${TEMPLATE_PREFIX}${pgliteVersion()}-schema${LATEST_SCHEMA_VERSION}-${schemaFingerprint()}`);
}

/** A data dir PGlite has never initialized (no PG_VERSION yet). */
export function isFreshDataDir(pgdata: string): boolean {
  return !existsSync(join(pgdata, 'PG_VERSION'));
}

/**
 * Copies the template into `pgdata` (an empty directory); false when there is none. A template
 * appears by one rename (template-build.ts), so one that exists is whole.
 */
export function copyTemplate(pgdata: string, cacheDir = CACHE_DIR): boolean {
  const path = templatePath(cacheDir);
  if (isFreshDataDir(path)) return false;
  cpSync(path, pgdata, { recursive: true });
  return true;
}

/** Empties a data dir that a failed start left half-written, so initdb can run in it. */
export function emptyDir(dir: string): void {
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
}

/** The default cache directory (node_modules/.cache/phonebridge). */
export function defaultTemplateDir(): string {
  return CACHE_DIR;
}
