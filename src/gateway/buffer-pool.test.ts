import { describe, expect, it } from 'vitest';
import { BufferPool, POOLED_MIN_BYTES } from './buffer-pool.ts';

describe('BufferPool', () => {
  it('hands out exactly the size asked for, and the same memory again once it is given back', () => {
    const pool = new BufferPool(512 * 1024, 8 * 1024 * 1024);
    const a = pool.take(100_000);
    expect(a.length).toBe(100_000);
    expect(a.buffer.byteLength).toBe(131_072); // its size class
    pool.release(a);
    expect(pool.heldBytes).toBe(131_072);
    const b = pool.take(70_000); // the same class
    expect(b.length).toBe(70_000);
    expect(b.buffer).toBe(a.buffer);
    expect(pool.heldBytes).toBe(0);
    // Another class does not take it.
    pool.release(b);
    expect(pool.take(200_000).buffer).not.toBe(a.buffer);
  });

  it('leaves small buffers to Node and large ones to plain allocations, and keeps neither', () => {
    const pool = new BufferPool(256 * 1024, 8 * 1024 * 1024);
    const small = pool.take(POOLED_MIN_BYTES - 1);
    expect(small.length).toBe(POOLED_MIN_BYTES - 1);
    pool.release(small); // a slice of Node's shared pool: never reused from here
    const large = pool.take(300_000);
    expect(large.length).toBe(300_000);
    pool.release(large);
    expect(pool.heldBytes).toBe(0);
  });

  it("never takes in a slice of Node's shared pool, even one at offset 0 of an 8 KiB ArrayBuffer", () => {
    const pool = new BufferPool(512 * 1024, 8 * 1024 * 1024);
    // Two of these fill one of Node's 8 KiB pools: within three, one starts a fresh pool.
    let first: Buffer | undefined;
    for (let i = 0; i < 3 && !first; i++) {
      const b = pool.take(POOLED_MIN_BYTES - 1);
      if (b.byteOffset === 0 && b.buffer.byteLength === Buffer.poolSize) first = b;
    }
    expect(first).toBeDefined();
    pool.release(first!);
    expect(pool.heldBytes).toBe(0);
    expect(pool.take(Buffer.poolSize).buffer).not.toBe(first!.buffer);
  });

  it('keeps no more than its budget: what comes back past it is dropped', () => {
    const pool = new BufferPool(512 * 1024, 512 * 1024);
    const taken = [pool.take(200_000), pool.take(200_000), pool.take(200_000)];
    for (const b of taken) pool.release(b);
    expect(pool.heldBytes).toBe(2 * 262_144);
    const again = [pool.take(200_000), pool.take(200_000), pool.take(200_000)];
    expect(new Set(again.map((b) => b.buffer)).size).toBe(3);
    expect(again.filter((b) => taken.some((t) => t.buffer === b.buffer))).toHaveLength(2);
  });
});
