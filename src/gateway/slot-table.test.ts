import { describe, expect, it } from 'vitest';
import { givenHashes, hashIntWith, hashStringWith, idTable, keyTable, SlotTable } from './slot-table.ts';
import { prng } from '../prng.ts';

function sameAs<K extends number | string>(table: SlotTable<K, { v: number }>, map: Map<K, { v: number }>): void {
  expect(table.size).toBe(map.size);
  for (const [k, v] of map) expect(table.get(k)).toBe(v);
  expect(new Map(table.entries())).toEqual(map);
}

describe('SlotTable', () => {
  it('behaves as a Map under ids handed out in order, settled out of order, across growth', () => {
    const rnd = prng(7);
    const table = idTable<{ v: number }>(2);
    const map = new Map<number, { v: number }>();
    let next = 1;
    for (let step = 0; step < 20_000; step++) {
      const live = [...map.keys()];
      // Up to ~300 in flight at the peak, down to none: the table grows several times.
      const target = step % 4000 < 2000 ? 300 : 0;
      if (live.length < target && rnd() < 0.7) {
        const value = { v: next };
        table.set(next, value);
        map.set(next, value);
        next++;
      } else if (live.length) {
        const id = live[Math.floor(rnd() * live.length)];
        expect(table.delete(id)).toBe(true);
        map.delete(id);
        expect(table.get(id)).toBeUndefined();
      }
      if (step % 997 === 0) sameAs(table, map);
    }
    sameAs(table, map);
  });

  it('finds entries whose ids collide on their home slot, after deletes in the run between them', () => {
    const table = idTable<{ v: number }>(4); // 8 slots
    const ids = [3, 11, 19, 4, 27, 12]; // 3, 11, 19, 27 share slot 3; 4 and 12 share slot 4
    for (const id of ids) table.set(id, { v: id });
    const deleted: number[] = [];
    for (const gone of [11, 4, 3]) {
      expect(table.delete(gone)).toBe(true);
      expect(table.delete(gone)).toBe(false);
      deleted.push(gone);
      for (const id of ids) expect(table.get(id)?.v).toBe(deleted.includes(id) ? undefined : id);
    }
    expect(table.size).toBe(3);
    expect(
      table
        .entries()
        .map(([k]) => k)
        .sort((a, b) => a - b),
    ).toEqual([12, 19, 27]);
  });

  it('replaces the value of an id set twice, and takes ids past 2^32', () => {
    const table = idTable<{ v: number }>();
    const big = 2 ** 40 + 5;
    table.set(5, { v: 1 });
    table.set(big, { v: 2 });
    table.set(5, { v: 3 });
    expect(table.size).toBe(2);
    expect(table.get(5)?.v).toBe(3);
    expect(table.get(big)?.v).toBe(2);
    expect(table.has(2 ** 40 + 6)).toBe(false);
    table.clear();
    expect(table.size).toBe(0);
    expect(table.get(5)).toBeUndefined();
  });

  it('behaves as a Map under string keys (a session and a client id), with the same churn', () => {
    const rnd = prng(11);
    const table = keyTable<{ v: number }>();
    const map = new Map<string, { v: number }>();
    const sessions = ['4f1c2a9e-0b7d-4c61-9f0e-2d3b5a6c7e8f', 'a', ''];
    for (let step = 0; step < 20_000; step++) {
      const key = `${sessions[step % 3]}\u0000number:${Math.floor(rnd() * 400)}`;
      // Half the time with the key's hash passed in, as a caller that hashed it once does.
      const h = rnd() < 0.5 ? table.hashOf(key) : undefined;
      if (map.has(key) && rnd() < 0.6) {
        expect(table.delete(key, h)).toBe(true);
        map.delete(key);
      } else {
        const value = { v: step };
        table.set(key, value, h);
        map.set(key, value);
      }
      expect(table.get(key, h)).toBe(map.get(key));
      if (step % 997 === 0) sameAs(table, map);
    }
    sameAs(table, map);
  });

  it('spreads keys chosen to share a home slot under one seed once the seed is another', () => {
    // What a client could do with its request ids if the hash were known: 64 keys whose low
    // 10 bits (a 1,024-slot table) agree under seed 1, found by trying ids in turn.
    const key = (n: number) => `4f1c2a9e-0b7d-4c61-9f0e-2d3b5a6c7e8f\u0000string:${n}`;
    const slot = (k: string, seed: number) => hashStringWith(k, seed) & 1023;
    const target = slot(key(0), 1);
    const chosen: string[] = [];
    for (let n = 0; chosen.length < 64; n++) if (slot(key(n), 1) === target) chosen.push(key(n));
    for (const seed of [2, 3, 0x7fffffff, -5]) {
      const perSlot = new Map<number, number>();
      for (const k of chosen) perSlot.set(slot(k, seed), (perSlot.get(slot(k, seed)) ?? 0) + 1);
      // 64 keys over 1,024 slots at random: at least 50 distinct slots, none with more than 4.
      expect(perSlot.size).toBeGreaterThanOrEqual(50);
      expect(Math.max(...perSlot.values())).toBeLessThanOrEqual(4);
    }
  });

  it('hashes keys that differ in one code unit, or only in length, apart', () => {
    const seen = new Set<number>();
    const base = 'a'.repeat(40);
    for (let i = 0; i < 40; i++)
      for (const c of ['b', '\u0000', '\uffff']) seen.add(hashStringWith(base.slice(0, i) + c + base.slice(i + 1), 9));
    for (let n = 0; n <= 40; n++) seen.add(hashStringWith(base.slice(0, n), 9));
    expect(seen.size).toBe(40 * 3 + 41);
  });

  it('spreads a string hash and consecutive ids over the low bits, apart for another string', () => {
    const a = hashStringWith('node-a', 7);
    const b = hashStringWith('node-b', 7);
    const slots = new Set<number>();
    let same = 0;
    for (let rid = 1; rid <= 512; rid++) {
      slots.add(hashIntWith(rid, a) & 1023);
      if (hashIntWith(rid, a) === hashIntWith(rid, b)) same++;
    }
    // 512 keys in 1,024 slots: about 400 distinct for a uniform hash.
    expect(slots.size).toBeGreaterThan(350);
    expect(same).toBeLessThan(3);
  });

  it('a table given every hash finds its keys by them, and refuses to hash one itself', () => {
    const t = new SlotTable<string, { v: number }>(givenHashes, '');
    for (let i = 0; i < 100; i++) t.set(`k${i}`, { v: i }, hashIntWith(i, 99));
    for (let i = 0; i < 100; i++) expect(t.get(`k${i}`, hashIntWith(i, 99))?.v).toBe(i);
    expect(() => t.get('k1')).toThrow(/given every key its hash/);
  });
});
