import { describe, expect, it } from 'vitest';
import { inFlightHash, inFlightKey, sessionHashOf } from './fast-post.ts';
import { hashString } from './slot-table.ts';
import type { SessionRecord } from '../bus/types.ts';

const session = (id: string) => ({ id }) as SessionRecord;

describe('inFlightHash', () => {
  it('is the same from a session record (the fast path) and from its id alone (cancellations, the general path)', () => {
    const s = session('4Hq1Wl3mX0vYb8kP2cT9rN5sZ7uJ6eA1dF3gH0iK2lM');
    for (const id of [0, 1, -1, 9, 2 ** 31 - 1, 2 ** 31, 2 ** 53 - 1, -(2 ** 40), 1.5, '', '9', 'a-é-\u{1f600}']) {
      expect(inFlightHash(sessionHashOf(s), id)).toBe(inFlightHash(hashString(s.id), id));
      expect(sessionHashOf(s)).toBe(hashString(s.id)); // and the memo keeps it
    }
  });

  it('spreads one session’s ids, and the same id in two sessions, over the low bits a table uses', () => {
    const a = hashString('session-a');
    const b = hashString('session-b');
    const low = (h: number) => h & 1023;
    const numbers = new Set<number>();
    const strings = new Set<number>();
    for (let id = 0; id < 512; id++) {
      numbers.add(low(inFlightHash(a, id)));
      strings.add(low(inFlightHash(a, `req-${id}`)));
    }
    // 512 keys in 1,024 slots: a uniform hash leaves about 400 distinct; consecutive ids
    // mapped to themselves would give 512, one constant to 1.
    expect(numbers.size).toBeGreaterThan(350);
    expect(strings.size).toBeGreaterThan(350);
    let same = 0;
    for (let id = 0; id < 256; id++) if (inFlightHash(a, id) === inFlightHash(b, id)) same++;
    expect(same).toBeLessThan(3);
  });

  it('keeps a number and the string of its digits apart in the key', () => {
    expect(inFlightKey('s', 1)).not.toBe(inFlightKey('s', '1'));
  });
});
