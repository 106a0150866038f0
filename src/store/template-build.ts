// Builds the prepared embedded data dir that new data dirs are copied from
// (src/store/database/template.ts): initdb and every migration, by the same code a first start
// runs (serveEmbedded, then createStore's migrate), in a scratch dir. No account is made: that
// is each relay's own first start (openStore's ensureAccount).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { serveEmbedded } from './database/embedded.ts';
import { defaultTemplateDir, TEMPLATE_PREFIX, templatePath } from './database/template.ts';
import { createStore } from './kysely-store.ts';

/** Builds the template unless it is there; returns its path. Older templates in `cacheDir` go. */
export async function buildTemplate(cacheDir = defaultTemplateDir()): Promise<string> {
  const path = templatePath(cacheDir);
  if (existsSync(path)) return path;
  mkdirSync(cacheDir, { recursive: true });
  const scratch = mkdtempSync(join(cacheDir, 'building-'));
  try {
    // A template dir that does not exist: the scratch cluster runs initdb itself.
    const source = await serveEmbedded(scratch, { templateDir: join(scratch, 'none') });
    try {
      const store = await createStore(source);
      await store.close();
    } finally {
      await source.close();
    }
    try {
      // One rename: a reader sees no template or a whole one.
      renameSync(join(scratch, 'pgdata'), path);
    } catch (err) {
      // Another build (a second install at the same time) got there first.
      if (!existsSync(path)) throw err;
    }
    for (const name of readdirSync(cacheDir))
      if (name.startsWith(TEMPLATE_PREFIX) && name !== basename(path))
        rmSync(join(cacheDir, name), { recursive: true, force: true });
    return path;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
