// Kysely's values, loaded from its CommonJS build. `phonebridge` runs its TypeScript through tsx's
// loader hooks, and Node 20 runs those hooks on another thread, one round trip per module for
// every ESM import: Kysely's ESM build is about 290 modules, which cost a CLI command or a node
// about 0.7 s of CPU at start (`require` skips the hooks: about 0.2 s). Every value import of
// kysely goes through this file (eslint's no-restricted-imports), so one copy of the library is
// loaded; types still come from 'kysely' itself (erased at run time).
import { createRequire } from 'node:module';
import type * as KyselyModule from 'kysely';

const kysely = createRequire(import.meta.url)('kysely') as typeof KyselyModule;

export const { Kysely, PostgresDialect, sql } = kysely;
export type Kysely<DB> = KyselyModule.Kysely<DB>;
