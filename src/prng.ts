// A seeded pseudo-random generator (mulberry32): tiny and fast, the same sequence for the same
// seed on every run. For deterministic choices (the phone simulator's names) and seeded tests;
// never for anything secret (node:crypto is).

/** Uniform numbers in [0, 1), the same sequence for the same `seed`. */
export function prng(seed: number): () => number {
  let a = seed | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
