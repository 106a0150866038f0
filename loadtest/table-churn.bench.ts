// `node --expose-gc --import tsx loadtest/table-churn.bench.ts [--ops 200000]`: the heap a
// long-lived table allocates per call in flight added and removed, a `Map` against
// src/gateway/slot-table.ts (docs/decisions/0236-tables-that-do-not-churn.md). Per shape of
// traffic (one call at a time, so the table empties after each; 32 in flight), bytes per
// add-and-delete by V8 heap space, read from v8.getHeapSpaceStatistics() around the loop with a
// young generation large enough that no collection runs inside it. The keys are made before
// the loop, flat, so the figures are the tables' own.
import v8 from 'node:v8';
import { parseArgs } from 'node:util';
import { idTable, keyTable } from '../src/gateway/slot-table.ts';

const { values } = parseArgs({ options: { ops: { type: 'string', default: '200000' } } });
const ops = Math.max(1000, Math.min(5_000_000, Number(values.ops)));
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run with --expose-gc');
  process.exit(2);
}

interface Table<K> {
  set(k: K, v: object): unknown;
  delete(k: K): unknown;
}

const spaces = () => new Map(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]));

function measure<K>(table: Table<K>, keys: K[], inFlight: number): Record<string, number> {
  const entry = {};
  // Settles the table into its steady size first (a Map's first growth, the slot arrays).
  for (let i = 0; i < 2000; i++) {
    table.set(keys[i], entry);
    if (i >= inFlight - 1) table.delete(keys[i - inFlight + 1]);
  }
  for (let i = 2000 - inFlight + 1; i < 2000; i++) table.delete(keys[i]);
  gc!();
  const before = spaces();
  for (let i = 0; i < ops; i++) {
    table.set(keys[2000 + i], entry);
    if (i >= inFlight - 1) table.delete(keys[2000 + i - inFlight + 1]);
  }
  const after = spaces();
  const out: Record<string, number> = {};
  for (const [name, used] of after) {
    const perOp = (used - (before.get(name) ?? 0)) / ops;
    if (Math.abs(perOp) >= 0.05) out[name] = Math.round(perOp * 10) / 10;
  }
  return out;
}

const ids = Array.from({ length: ops + 2000 }, (_, i) => i + 1);
// Flat strings (a concatenation is flattened, into a new string, the first time it is hashed).
const strings = ids.map((i) => Buffer.from(`4f1c2a9e-0b7d-4c61-9f0e-2d3b5a6c7e8f\u0000number:${i}`).toString('latin1'));
for (const inFlight of [1, 32]) {
  const rows: Array<[string, Record<string, number>]> = [
    ['Map, ids', measure(new Map<number, object>(), ids, inFlight)],
    ['idTable', measure(idTable<object>(), ids, inFlight)],
    ['Map, strings', measure(new Map<string, object>(), strings, inFlight)],
    ['keyTable', measure(keyTable<object>(), strings, inFlight)],
  ];
  for (const [name, perOp] of rows)
    console.log(
      `${String(inFlight).padStart(2)} in flight  ${name.padEnd(13)} bytes per add+delete: ${
        Object.entries(perOp)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none'
      }`,
    );
}
