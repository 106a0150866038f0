// The prepared data dir (template.ts): a new embedded data dir starts as a copy of it, an
// initialized one never does, and a damaged one falls back to initdb. The built one is the
// schema this build migrates to, with no account in it.
import { PGlite } from '@electric-sql/pglite';
import { cpSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LATEST_SCHEMA_VERSION } from '../migrations/index.ts';
import { buildTemplate } from '../template-build.ts';
import { serveEmbedded } from './embedded.ts';
import { templatePath } from './template.ts';

const root = mkdtempSync(join(tmpdir(), 'pb-tpl-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/**
 * A template whose cluster carries a marker table, so a test can tell it was used: a copy of the
 * prepared one (test/global-setup.ts builds it), which saves an initdb.
 */
const marked = join(root, 'marked');
beforeAll(async () => {
  mkdirSync(marked);
  const scratch = join(root, 'scratch');
  cpSync(templatePath(), scratch, { recursive: true });
  const db = await PGlite.create({ dataDir: scratch });
  await db.exec('create table from_template (x int)');
  await db.close();
  renameSync(scratch, templatePath(marked));
}, 60_000);

async function query<T>(dataDir: string, templateDir: string, text: string): Promise<T> {
  const source = await serveEmbedded(dataDir, { templateDir });
  const client = new pg.Client(source.pgConfig);
  try {
    await client.connect();
    return (await client.query(text)).rows[0] as T;
  } finally {
    await client.end();
    await source.close();
  }
}

async function hasMarker(dataDir: string, templateDir: string): Promise<boolean> {
  const r = await query<{ present: boolean }>(
    dataDir,
    templateDir,
    `select to_regclass('public.from_template') is not null as present`,
  );
  return r.present;
}

describe('embedded data dir template', () => {
  it('a new data dir starts from the template; once initialized it is never replaced', async () => {
    const dir = join(root, 'fresh');
    expect(await hasMarker(dir, marked)).toBe(true);
    expect(existsSync(join(dir, 'pgdata', 'PG_VERSION'))).toBe(true);
    // Reopened with another template available: the data dir is kept as it is.
    expect(await hasMarker(dir, join(root, 'no-template-here'))).toBe(true);
  }, 60_000);

  // Without a template a new data dir runs initdb too: buildTemplate below starts that way.
  it('with a damaged template, a new data dir runs initdb', async () => {
    const broken = join(root, 'broken');
    mkdirSync(templatePath(broken), { recursive: true });
    writeFileSync(join(templatePath(broken), 'PG_VERSION'), 'not a cluster\n');
    expect(await hasMarker(join(root, 'from-broken'), broken)).toBe(false);
  }, 90_000);

  it('buildTemplate builds it once, named for this PGlite and these migrations, migrated and with no account', async () => {
    const dir = join(root, 'built');
    mkdirSync(join(dir, 'pglite-0.0.0-schema1-000000000000'), { recursive: true });
    const path = await buildTemplate(dir);
    expect(basename(path)).toMatch(
      new RegExp(`^pglite-\\d+\\.\\d+\\.\\d+.*-schema${LATEST_SCHEMA_VERSION}-[0-9a-f]{12}$`),
    );
    expect(existsSync(join(path, 'PG_VERSION'))).toBe(true);
    // An older template in the same cache is removed.
    expect(existsSync(join(dir, 'pglite-0.0.0-schema1-000000000000'))).toBe(false);
    expect(await buildTemplate(dir)).toBe(path); // already there: not rebuilt
    const dataDir = join(root, 'from-built');
    expect(await query<{ version: number }>(dataDir, dir, 'select version from schema_version')).toEqual({
      version: LATEST_SCHEMA_VERSION,
    });
    expect(await query<{ n: string }>(dataDir, dir, 'select count(*) as n from accounts')).toEqual({ n: '0' });
  }, 90_000);
});
