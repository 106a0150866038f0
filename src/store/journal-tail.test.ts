import { describe, expect, it } from 'vitest';
import { advanceTail, formatTailCursor, parseTailCursor, type TailCursor } from './journal-tail.ts';

const start: TailCursor = { safe: 10n, pending: [], delivered: [] };

describe('journal tail bookkeeping', () => {
  it('does not settle past a gap while a transaction of the reading snapshot runs', () => {
    // Read 12 (11 is a gap: a transaction with xid 100 still runs); snapshot xmin 100, xmax 105.
    const a = advanceTail(start, [12n], false, 100n, 105n);
    expect(a).toEqual({ safe: 10n, pending: [{ hw: 12n, xmax: 105n }], delivered: [12n] });
    // Still running (xmin 100): nothing settles.
    const b = advanceTail(a, [], false, 100n, 106n);
    expect(b.safe).toBe(10n);
    // It committed: 11 is read now, and every xid below 105 is done: settled up to 12.
    const c = advanceTail(b, [11n], false, 105n, 107n);
    expect(c).toEqual({ safe: 12n, pending: [], delivered: [] });
  });

  it('a truncated read settles nothing above its last id', () => {
    const a = advanceTail(start, [11n, 12n, 13n], false, 50n, 60n);
    const b = advanceTail({ ...a, pending: [{ hw: 20n, xmax: 55n }] }, [14n], true, 70n, 80n);
    expect(b.safe).toBe(10n);
  });

  it('round-trips through its text form; anything else starts over', () => {
    const c: TailCursor = { safe: 5n, pending: [{ hw: 9n, xmax: 123n }], delivered: [7n, 9n] };
    expect(parseTailCursor(formatTailCursor(c))).toEqual(c);
    expect(parseTailCursor('42')).toBeUndefined();
  });
});
