// The initdb template: a new embedded data dir starts from it, an initialized one never does,
// and a damaged one falls back to initdb. Each case needs its own PGlite cluster (~2–7 s each).
import { PGlite } from '@electric-sql/pglite';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveEmbedded } from './embedded.ts';
import { buildTemplate, templatePath } from './template.ts';

const root = mkdtempSync(join(tmpdir(), 'pb-tpl-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A template whose cluster carries a marker table, so a test can tell it was used. */
const marked = join(root, 'marked');
beforeAll(async () => {
  mkdirSync(marked);
  const scratch = join(root, 'scratch');
  const db = await PGlite.create({ dataDir: scratch });
  await db.exec('create table from_template (x int)');
  writeFileSync(templatePath(marked), Buffer.from(await (await db.dumpDataDir('gzip')).arrayBuffer()));
  await db.close();
}, 60_000);

async function hasMarker(dataDir: string, templateDir: string): Promise<boolean> {
  const source = await serveEmbedded(dataDir, { templateDir });
  const client = new pg.Client(source.pgConfig);
  try {
    await client.connect();
    const r = await client.query(`select to_regclass('public.from_template') is not null as present`);
    return r.rows[0].present as boolean;
  } finally {
    await client.end();
    await source.close();
  }
}

describe('embedded initdb template', () => {
  it('a new data dir starts from the template; once initialized it is never replaced', async () => {
    const dir = join(root, 'fresh');
    expect(await hasMarker(dir, marked)).toBe(true);
    expect(existsSync(join(dir, 'pgdata', 'PG_VERSION'))).toBe(true);
    // Reopened with another template available: the data dir is kept as it is.
    expect(await hasMarker(dir, join(root, 'no-template-here'))).toBe(true);
  }, 60_000);

  it('without a template, or with a damaged one, a new data dir runs initdb', async () => {
    const broken = join(root, 'broken');
    mkdirSync(broken);
    writeFileSync(templatePath(broken), 'not a tarball');
    expect(await hasMarker(join(root, 'from-broken'), broken)).toBe(false);
    expect(await hasMarker(join(root, 'from-none'), join(root, 'none'))).toBe(false);
  }, 90_000);

  it('buildTemplate writes the template once, named for this PGlite version', async () => {
    const dir = join(root, 'built');
    const path = await buildTemplate(dir);
    expect(path).toMatch(/pglite-\d+\.\d+\.\d+.*-initdb\.tar\.gz$/);
    expect(existsSync(path)).toBe(true);
    expect(await buildTemplate(dir)).toBe(path); // already there: not rebuilt
    expect(await hasMarker(join(root, 'from-built'), dir)).toBe(false);
  }, 90_000);
});
