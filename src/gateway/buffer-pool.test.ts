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
    // A slice that does not start its ArrayBuffer is not one of ours either.
    const whole = pool.take(8192);
    pool.release(whole.subarray(16));
    expect(pool.heldBytes).toBe(0);
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
