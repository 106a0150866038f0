import { describe, expect, it } from 'vitest';
import { Deadlines, type Timed } from './deadlines.ts';

interface Item extends Timed {
  name: string;
}
const item = (name: string): Item => ({
  name,
  dueAt: 0,
  prevDue: undefined,
  nextDue: undefined,
  dueList: undefined,
});

/** Resolves once `f()` holds; fails after `ms` (a bound, not a timing assertion). */
async function until(f: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('Deadlines', () => {
  it('clear forgets every item without expiring one, and the table serves again after', async () => {
    const fired: string[] = [];
    const d = new Deadlines<Item>((i) => fired.push(i.name));
    const [a, b, c] = ['a', 'b', 'c'].map(item);
    d.start(a, 20);
    d.start(b, 20);
    d.start(c, 40);
    d.clear();
    expect(d.size).toBe(0);
    expect([a, b, c].map((i) => i.dueList)).toEqual([undefined, undefined, undefined]);
    d.cancel(a); // harmless once cleared
    await new Promise((r) => setTimeout(r, 80));
    expect(fired).toEqual([]);
    d.start(b, 20);
    await until(() => fired.length === 1);
    expect(fired).toEqual(['b']);
  });

  it('expires items in the order they started, never one that was cancelled, never early', async () => {
    const fired: Array<{ name: string; lateMs: number }> = [];
    const d = new Deadlines<Item>((i) => fired.push({ name: i.name, lateMs: performance.now() - i.dueAt }));
    const items = ['a', 'b', 'c', 'd', 'e'].map(item);
    for (const i of items) d.start(i, 30);
    d.cancel(items[0]); // the head: the timer armed for it finds the next one
    d.cancel(items[2]); // the middle
    expect(d.size).toBe(3);
    await until(() => fired.length === 3);
    expect(fired.map((f) => f.name)).toEqual(['b', 'd', 'e']);
    for (const f of fired) expect(f.lateMs).toBeGreaterThanOrEqual(0);
    expect(d.size).toBe(0);
    // Cancelling what already expired, or twice, changes nothing.
    d.cancel(items[1]);
    d.cancel(items[0]);
    expect(d.size).toBe(0);
  });

  it('keeps one list per delay: a short delay started later expires first', async () => {
    const fired: string[] = [];
    const d = new Deadlines<Item>((i) => fired.push(i.name));
    d.start(item('slow'), 200);
    d.start(item('fast'), 10);
    await until(() => fired.length === 2);
    expect(fired).toEqual(['fast', 'slow']);
  });

  it('start again moves an item to a new deadline; an expiry may start others', async () => {
    const fired: string[] = [];
    const again = item('again');
    const d: Deadlines<Item> = new Deadlines<Item>((i) => {
      fired.push(i.name);
      if (i.name === 'first') d.start(again, 10); // from inside the expiry, same list as before
    });
    const moved = item('moved');
    d.start(moved, 10);
    d.start(item('first'), 20);
    d.start(moved, 60); // no longer due at 10 ms: behind 'first'
    await until(() => fired.length === 3);
    expect(fired).toEqual(['first', 'again', 'moved']);
    expect(d.size).toBe(0);
  });

  it('a cancelled item holds no links (nothing kept alive through it)', () => {
    const d = new Deadlines<Item>(() => {});
    const [a, b, c] = ['a', 'b', 'c'].map(item);
    for (const i of [a, b, c]) d.start(i, 1_000);
    d.cancel(b);
    expect([b.prevDue, b.nextDue, b.dueList]).toEqual([undefined, undefined, undefined]);
    expect(a.nextDue).toBe(c);
    expect(c.prevDue).toBe(a);
    d.cancel(a);
    d.cancel(c);
    expect(d.size).toBe(0);
  });
});
