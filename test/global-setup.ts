// Once before the suite: the prepared embedded data dir every new data dir is copied from
// (src/store/database/template.ts). `npm ci` builds it; after a migration is added or edited it
// is stale, and without this every embedded relay in the suite would run initdb and migrate.
import { buildTemplate } from '../src/store/template-build.ts';

export async function setup(): Promise<void> {
  await buildTemplate();
}
