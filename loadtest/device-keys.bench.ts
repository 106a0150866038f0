// `node --import tsx loadtest/device-keys.bench.ts [OTHER_TREE]`: client CPU per phone-key lookup
// (`Store.getDeviceKeys`, 1, 7 and 32 ids, every id a paired device), this tree's store
// against OTHER_TREE's in alternating rounds in one process — an A/B that does not depend on
// how busy the shared cores are at a given moment (docs/BENCHMARKS.md, "storm"). Uses a
// throwaway database on the Postgres of PHONEBRIDGE_TEST_DATABASE_URL.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { sql } from '../src/store/kysely.ts';
import type { Kysely } from 'kysely';
import { postgresBackend, uid } from '../src/store/test-support.ts';
import type * as KyselyStore from '../src/store/kysely-store.ts';

type Mod = typeof KyselyStore;
const other = process.argv[2];
const trees: Array<[string, Mod]> = [['this tree', await import('../src/store/kysely-store.ts')]];
if (other) trees.push([other, (await import(pathToFileURL(resolve(other, 'src/store/kysely-store.ts')).href)) as Mod]);

const backend = postgresBackend();
const source = await backend.open();
const stores = await Promise.all(trees.map(([, m]) => m.createStore(source, {})));
const db = (stores[0] as unknown as { db: Kysely<unknown> }).db;
await stores[0].ensureAccount('acct');
const ids = Array.from({ length: 512 }, () => uid('dev'));
await sql`insert into devices (id, account_id, name, public_key)
  select id, 'acct', 'bench', 'pk' from unnest(${ids}::text[]) as u(id)`.execute(db);

const CALLS = 400;
async function round(i: number, n: number): Promise<number> {
  const s = stores[i];
  const c0 = process.cpuUsage();
  for (let k = 0; k < CALLS; k++) {
    const at = (k * n) % (ids.length - n);
    const found = await s.getDeviceKeys(ids.slice(at, at + n));
    if (found.size !== n) throw new Error('lookup lost a device');
  }
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / CALLS;
}
try {
  for (const n of [1, 7, 32]) {
    const per: number[][] = trees.map(() => []);
    for (let r = 0; r < 8; r++) for (let i = 0; i < trees.length; i++) per[i].push(await round(i, n));
    for (let i = 0; i < trees.length; i++) {
      const v = per[i].slice(2).sort((a, b) => a - b); // the first two rounds warm up
      console.log(
        `${n} ids, ${trees[i][0]}: ${v[Math.floor(v.length / 2)].toFixed(0)} µs client CPU per lookup (median of ${v.length} rounds; ${v.map((x) => x.toFixed(0)).join(' ')})`,
      );
    }
  }
} finally {
  for (const s of stores) await s.close();
  await source.close();
  await backend.cleanup();
}
