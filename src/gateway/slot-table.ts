import { randomBytes } from 'node:crypto';
import { charCodeAt } from '../protocol/string-builtins.ts';

/**
 * A table of calls in flight that allocates nothing once it has room for what is in flight
 * (docs/decisions/0236-tables-that-do-not-churn.md): the tables every call is entered in and
 * taken out of, by an id handed out in order or by a string.
 *
 * A long-lived `Map` with one entry added and one deleted per call allocates a new hash table
 * in V8's old space every few calls: each time it empties (it shrinks) and each time its
 * deleted entries fill it (it rehashes), 56–153 bytes a call that only a full mark-compact
 * frees. Here the slots are arrays made once: open addressing with linear probing from the
 * key's home slot, and a delete that shifts the entries after it back instead of leaving a
 * tombstone. The arrays grow (double) when more than half full and never shrink: their size
 * follows the most calls ever in flight at once, which their owners already bound.
 */
export class SlotTable<K extends number | string, V extends object> {
  private keys: K[];
  /** Each slot's key hash, kept so that deletes and growth never hash a key again. */
  private hashes: Int32Array;
  private values: Array<V | undefined>;
  private mask: number;
  private count = 0;

  /**
   * @param hash The key's hash (any integer; its low bits pick the home slot): `byId` for ids
   *   handed out in order, which then spread over the slots without collisions; `hashString`.
   * @param blank A key of K's type for the slots never used (keeps the arrays of one kind).
   */
  constructor(
    private readonly hash: (key: K) => number,
    private readonly blank: K,
    capacity = 16,
  ) {
    let size = 8;
    while (size < capacity * 2) size *= 2;
    this.keys = new Array<K>(size).fill(blank);
    this.hashes = new Int32Array(size);
    this.values = new Array<V | undefined>(size).fill(undefined);
    this.mask = size - 1;
  }

  get size(): number {
    return this.count;
  }

  /**
   * The key's hash in this table. A caller that looks one key up more than once (added, then
   * deleted when its call ends) hashes it once and passes it to each method as `h`.
   */
  hashOf(key: K): number {
    return this.hash(key) | 0;
  }

  get(key: K, h = this.hashOf(key)): V | undefined {
    const { keys, hashes, values, mask } = this;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const v = values[i];
      if (v === undefined) return undefined;
      if (hashes[i] === h && keys[i] === key) return v;
    }
  }

  has(key: K, h = this.hashOf(key)): boolean {
    return this.get(key, h) !== undefined;
  }

  /** Adds or replaces the entry of `key`. */
  set(key: K, value: V, h = this.hashOf(key)): this {
    if ((this.count + 1) * 2 > this.keys.length) this.grow();
    const { keys, hashes, values, mask } = this;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      if (values[i] === undefined) {
        keys[i] = key;
        hashes[i] = h;
        values[i] = value;
        this.count++;
        return this;
      }
      if (hashes[i] === h && keys[i] === key) {
        values[i] = value;
        return this;
      }
    }
  }

  /** Removes `key`'s entry; false when there was none. */
  delete(key: K, h = this.hashOf(key)): boolean {
    const { keys, hashes, values, mask } = this;
    let i = h & mask;
    for (; ; i = (i + 1) & mask) {
      if (values[i] === undefined) return false;
      if (hashes[i] === h && keys[i] === key) break;
    }
    // Backward shift: an entry after the hole moves into it unless its home slot lies
    // (cyclically) after the hole and up to where it sits, where a lookup still finds it.
    for (let j = (i + 1) & mask; values[j] !== undefined; j = (j + 1) & mask) {
      const home = hashes[j] & mask;
      const stays = i <= j ? i < home && home <= j : i < home || home <= j;
      if (stays) continue;
      keys[i] = keys[j];
      hashes[i] = hashes[j];
      values[i] = values[j];
      i = j;
    }
    keys[i] = this.blank;
    values[i] = undefined;
    this.count--;
    return true;
  }

  /** The entries, in no particular order (a copy: the caller may settle them as it goes). */
  entries(): Array<[K, V]> {
    const out: Array<[K, V]> = [];
    const { keys, values } = this;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v !== undefined) out.push([keys[i], v]);
    }
    return out;
  }

  clear(): void {
    this.keys.fill(this.blank);
    this.values.fill(undefined);
    this.count = 0;
  }

  private grow(): void {
    const { keys, hashes, values } = this;
    const size = keys.length * 2;
    this.keys = new Array<K>(size).fill(this.blank);
    this.hashes = new Int32Array(size);
    this.values = new Array<V | undefined>(size).fill(undefined);
    this.mask = size - 1;
    this.count = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v !== undefined) this.set(keys[i], v, hashes[i]);
    }
  }
}

/** The hash of an id handed out in order: the id itself. */
export const byId = (id: number): number => id;

// Per process, so that a set of keys chosen to share a home slot (a client picks its request
// ids, which go into InFlightCalls' keys) shares one only by chance.
const SEED = randomBytes(4).readInt32LE(0);

/**
 * A seeded hash of a string's UTF-16 code units, two per step: each step multiplies and folds
 * the high bits back down, so which keys share low bits depends on the whole state and so on
 * the seed; murmur3's finaliser at the end. Not a cryptographic hash: a collision set that
 * does form is bounded by what a credential may have in flight.
 */
export function hashStringWith(s: string, seed: number): number {
  const n = s.length;
  let h = seed ^ n;
  let i = 0;
  for (; i + 1 < n; i += 2) {
    h = Math.imul(h ^ (charCodeAt.call(s, i) | (charCodeAt.call(s, i + 1) << 16)), 0x5bd1e995);
    h ^= h >>> 15;
  }
  if (i < n) {
    h = Math.imul(h ^ charCodeAt.call(s, i), 0x5bd1e995);
    h ^= h >>> 15;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/**
 * A hash of the integer `n` (its low 32 bits) under `seed`, a string's hash: for keys made of
 * a string and an id, hashed without their characters (docs/decisions/0241-the-request-path-without-runtime-calls.md).
 */
export function hashIntWith(n: number, seed: number): number {
  let h = Math.imul(seed ^ n, 0x5bd1e995);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** `hashStringWith` under this process's seed. */
export const hashString = (s: string): number => hashStringWith(s, SEED);

/** A table keyed by ids handed out in order. */
export function idTable<V extends object>(capacity?: number): SlotTable<number, V> {
  return new SlotTable<number, V>(byId, 0, capacity);
}

/** The hash function of a table whose owner passes every key's hash itself: never called. */
export const givenHashes = (): number => {
  throw new Error('this table is given every key its hash');
};

/** A table keyed by strings. */
export function keyTable<V extends object>(capacity?: number): SlotTable<string, V> {
  return new SlotTable<string, V>(hashString, '', capacity);
}

/** Orders `entries()` by key, where the order things were settled in should not change. */
export const byFirst = (a: [number, unknown], b: [number, unknown]): number => a[0] - b[0];
