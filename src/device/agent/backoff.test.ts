import { describe, expect, it } from 'vitest';
import { Backoff, BACKOFF_DEFAULTS } from './backoff.ts';
import { prng } from '../../prng.ts';

/** The largest share of `times` inside any window of `widthMs` (sliding, not bucketed). */
function densestShare(times: number[], widthMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let lo = 0, hi = 0; lo < sorted.length; lo++) {
    while (hi < sorted.length && sorted[hi] < sorted[lo] + widthMs) hi++;
    best = Math.max(best, hi - lo);
  }
  return best / sorted.length;
}

describe('Backoff', () => {
  it('draws each delay uniformly from [0, min(cap, base·2^n)]', () => {
    const random = prng(1); // seeded: the distribution tests never flake
    const windows: number[] = [];
    for (let n = 0; n < 10; n++) {
      const samples = Array.from({ length: 2000 }, () => {
        const b = new Backoff({ random });
        b.attempt = n;
        return b.next();
      });
      const window = Math.min(30_000, 500 * 2 ** n);
      windows.push(window);
      expect(Math.min(...samples)).toBeGreaterThanOrEqual(0);
      expect(Math.max(...samples)).toBeLessThanOrEqual(window);
      const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
      expect(Math.abs(mean / window - 0.5)).toBeLessThan(0.03); // uniform over the window: full jitter
    }
    expect(windows).toEqual([500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000]);
    expect(BACKOFF_DEFAULTS).toMatchObject({ baseMs: 500, capMs: 30_000 });
  });

  it('spreads the first retry after a drop over 5 s, resets after a healthy connection, keeps widening while flapping', () => {
    let now = 0;
    const b = new Backoff({ now: () => now, random: () => 0.999 });
    expect(b.window()).toBe(500); // start-up failures retry fast
    b.connected();
    now += 10_000; // dropped before resetAfterMs: not healthy
    b.dropped();
    expect([b.next(), b.next(), b.next()].map((d) => Math.ceil(d / 1000))).toEqual([5, 10, 20]);
    b.connected();
    now += 5_000;
    b.dropped(); // flapping: carries on from where it was
    expect(b.window()).toBe(30_000);
    b.connected();
    now += 60_000; // up a minute: healthy
    b.dropped();
    expect(b.window()).toBe(5000);
  });

  it('1,000 phones dropped at once by a relay restart do not come back in one burst', () => {
    const random = prng(42);
    const firstDelays = Array.from({ length: 1000 }, () => {
      const phone = new Backoff({ random });
      phone.connected();
      phone.dropped();
      return phone.next();
    });
    expect(Math.max(...firstDelays)).toBeLessThanOrEqual(BACKOFF_DEFAULTS.dropWindowMs);
    expect(Math.max(...firstDelays)).toBeLessThanOrEqual(BACKOFF_DEFAULTS.capMs);
    expect(Math.min(...firstDelays)).toBeLessThan(100);
    expect(Math.max(...firstDelays)).toBeGreaterThan(4900); // they use the whole window
    expect(densestShare(firstDelays, 100)).toBeLessThanOrEqual(0.05);
  });

  it.each([1_000, 5_000, 20_000])(
    'while the relay is down for %i ms, phones keep retrying and arrive spread, within down time + cap',
    (downMs) => {
      const random = prng(downMs);
      const arrivals = Array.from({ length: 1000 }, () => {
        const phone = new Backoff({ random });
        phone.connected();
        phone.dropped();
        let t = phone.next();
        while (t < downMs) t += phone.next(); // each attempt before the relay is back fails
        return t;
      });
      expect(Math.max(...arrivals)).toBeLessThanOrEqual(downMs + BACKOFF_DEFAULTS.capMs);
      expect(densestShare(arrivals, 100)).toBeLessThanOrEqual(0.05);
    },
  );
});
