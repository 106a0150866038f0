import { describe, expect, it } from 'vitest';
import { RequestIds, RID_BLOCK_SIZE } from './request-ids.ts';

/** A node id's block counter, as the bus keeps it (the hit counter of router.ts ridBlockKey). */
function counter(start = 0) {
  let n = start;
  const fetched: number[] = [];
  return {
    fetched,
    fetch: () => {
      fetched.push(++n);
      return Promise.resolve(n);
    },
  };
}

async function firstId(ids: RequestIds): Promise<number> {
  let id = ids.take();
  if (id === 0) {
    await ids.more();
    id = ids.take();
  }
  return id;
}

describe('request ids on the bus', () => {
  it('two processes of one node id, one after the other, never share an id', async () => {
    const c = counter();
    const before = new RequestIds(c.fetch);
    const used = new Set<number>();
    used.add(await firstId(before));
    for (let i = 0; i < 1000; i++) used.add(before.take());
    const after = new RequestIds(c.fetch);
    const first = await firstId(after);
    expect(used.has(first)).toBe(false);
    for (let i = 0; i < 1000; i++) expect(used.has(after.take())).toBe(false);
  });

  it('are small integers (below 2^30), never 0, whatever the counter', async () => {
    for (const start of [0, 1023, 1024, 2 ** 40]) {
      const ids = new RequestIds(counter(start).fetch);
      const id = await firstId(ids);
      expect(id).toBeGreaterThan(0);
      expect(id).toBeLessThan(2 ** 30);
      expect(Number.isInteger(id)).toBe(true);
    }
  });

  it('fetches the next block halfway through one, and moves to it without a wait', async () => {
    const c = counter();
    const ids = new RequestIds(c.fetch);
    const first = await firstId(ids);
    expect(c.fetched).toEqual([1]);
    // The first id taken, 2^19 − 3 more: 2^19 + 1 of the block's 2^20 − 1 ids left.
    for (let i = 0; i < RID_BLOCK_SIZE / 2 - 3; i++) ids.take();
    await Promise.resolve();
    expect(c.fetched).toEqual([1]);
    ids.take();
    await ids.more();
    expect(c.fetched).toEqual([1, 2]);
    let last = 0;
    for (let i = 0; i < RID_BLOCK_SIZE / 2; i++) last = ids.take();
    expect(last).toBe(first + RID_BLOCK_SIZE - 2);
    const next = ids.take();
    expect(next).not.toBe(0);
    expect(next).toBe(2 * RID_BLOCK_SIZE + 1);
  });

  it('a block the bus could not number is taken at random, and ids still come', async () => {
    const ids = new RequestIds(() => Promise.reject(new Error('bus down')));
    const id = await firstId(ids);
    expect(id).toBeGreaterThan(0);
    expect(id).toBeLessThan(2 ** 30);
  });
});
