import { describe, expect, it } from 'vitest';
import { BusTimeoutError } from '../errors.ts';
import { prng } from '../../prng.ts';
import { PushReader } from './push-reader.ts';
import { BusUnavailableError } from '../errors.ts';
import { DONE, integerReply, MORE, ReplyError, ReplyQueue, WRONG, type Awaited } from './replies.ts';

/** An awaited reply that records what it got (a late one is not recorded). */
function awaiting(asked = performance.now()): Awaited & { got: Array<number | string | Error> } {
  const got: Array<number | string | Error> = [];
  return {
    asked,
    got,
    reply(b, start, end, late) {
      if (!late) got.push(b[start] === 0x2b ? b.toString('latin1', start + 1, end - 2) : integerReply(b, start, end));
      return DONE;
    },
    fail(err) {
      got.push(err);
    },
  };
}

/** A count (or an error): anything else is another command's reply. */
function counted(): Awaited & { got: Array<number | Error> } {
  const got: Array<number | Error> = [];
  return {
    asked: performance.now(),
    got,
    reply(b, start, end, late) {
      if (b[start] !== 0x3a && b[start] !== 0x2d) return WRONG;
      if (!late) got.push(integerReply(b, start, end));
      return DONE;
    },
    fail(err) {
      got.push(err);
    },
  };
}

/** +OK then `$token`, as quiet.ts's confirmation: only it claims its token's reply. */
function marker(token: string): Awaited & { got: Array<string | Error> } {
  const got: Array<string | Error> = [];
  const echoed = `$${token.length}\r\n${token}\r\n`;
  let on = false;
  const claims = (b: Buffer, start: number, end: number) => b.toString('latin1', start, end) === echoed;
  return {
    asked: performance.now(),
    got,
    claims,
    reply(b, start, end, late) {
      if (!on && b[start] === 0x2b) {
        on = true;
        return MORE;
      }
      if (!claims(b, start, end)) return WRONG;
      if (!late) got.push(token);
      return DONE;
    },
    fail(err) {
      got.push(err);
    },
  };
}

describe('ReplyQueue', () => {
  it('matches replies to commands in order, across any cut of the bytes', () => {
    const next = prng(7);
    for (let round = 0; round < 40; round++) {
      const kinds = Array.from({ length: 1 + Math.floor(next() * 40) }, () => Math.floor(next() * 4));
      const wire = kinds.map((k, i) => [`+OK\r\n`, `:${i * 37}\r\n`, `-ERR no ${i}\r\n`, `:-${i}\r\n`][k]).join('');
      const queue = new ReplyQueue(60_000, () => {
        throw new Error('a frame nobody waited for');
      });
      const slots = kinds.map(() => awaiting());
      for (const s of slots) queue.push(s);
      const reader = new PushReader(undefined, (frames) => queue.frames(frames));
      const bytes = Buffer.from(wire);
      for (let i = 0; i < bytes.length;) {
        const n = 1 + Math.floor(next() * 9);
        reader.write(Buffer.from(bytes.subarray(i, i + n)));
        i += n;
      }
      expect(queue.length).toBe(0);
      slots.forEach((s, i) => {
        const want = ['OK', i * 37, (e: unknown) => e instanceof ReplyError && e.message === `ERR no ${i}`, -i][
          kinds[i]
        ];
        expect(s.got).toHaveLength(1);
        if (typeof want === 'function') expect(want(s.got[0])).toBe(true);
        else expect(s.got[0]).toBe(want);
      });
      queue.close(new Error('closed'));
    }
  });

  it('gives frames nobody waits for to the other decoder, whole and in order', () => {
    const other: string[] = [];
    const queue = new ReplyQueue(60_000, (b) => other.push(b.toString()));
    const a = awaiting();
    queue.push(a);
    queue.frames(Buffer.from(':1\r\n+PONG\r\n$3\r\nabc\r\n'));
    expect(a.got).toEqual([1]);
    expect(other).toEqual(['+PONG\r\n$3\r\nabc\r\n']);
  });

  it('a command not answered in time fails as in doubt; its late reply is dropped, not given to the next', async () => {
    const queue = new ReplyQueue(30);
    const late = awaiting();
    queue.push(late);
    await expect.poll(() => late.got.length, { timeout: 2000 }).toBe(1);
    expect(late.got[0]).toBeInstanceOf(BusTimeoutError);
    const next = awaiting();
    queue.push(next);
    queue.frames(Buffer.from(':5\r\n')); // the late command's reply
    expect(next.got).toEqual([]);
    queue.frames(Buffer.from(':0\r\n'));
    expect(next.got).toEqual([0]);
    expect(late.got).toHaveLength(1);
    expect(queue.length).toBe(0);
  });

  it('fails only the commands past their time, and watches the younger ones', async () => {
    // The old one is due in 10 ms, the young one 2 s later (a margin for a loaded machine).
    const queue = new ReplyQueue(2000);
    const old = awaiting(performance.now() - 1990);
    const young = awaiting();
    queue.push(old);
    queue.push(young);
    await expect.poll(() => old.got.length, { timeout: 1500 }).toBe(1);
    expect(young.got).toEqual([]);
    await expect.poll(() => young.got.length, { timeout: 5000 }).toBe(1);
    expect(young.got[0]).toBeInstanceOf(BusTimeoutError);
  });

  it('closed, every waiting command fails with the reason, and so does any pushed later', () => {
    const queue = new ReplyQueue(60_000);
    const [a, b, c] = [awaiting(), awaiting(), awaiting()];
    queue.push(a);
    queue.push(b);
    queue.frames(Buffer.from('+OK\r\n'));
    const why = new Error('connection closed');
    queue.close(why);
    queue.push(c);
    expect(a.got).toEqual(['OK']);
    expect(b.got).toEqual([why]);
    expect(c.got).toEqual([why]);
  });

  it('bytes that are not RESP go to the other decoder, from where they start', () => {
    const other: string[] = [];
    const queue = new ReplyQueue(60_000, (b) => other.push(b.toString()));
    const [a, b] = [awaiting(), awaiting()];
    queue.push(a);
    queue.push(b);
    const reader = new PushReader(undefined, (frames) => queue.frames(frames));
    reader.write(Buffer.from(':2\r\nHTTP/1.1 400\r\n'));
    expect(a.got).toEqual([2]);
    expect(b.got).toEqual([]);
    expect(other).toEqual(['HTTP/1.1 400\r\n']);
    queue.close(new Error('closed'));
  });

  it('keeps no answered command alive while others still wait', () => {
    const queue = new ReplyQueue(60_000);
    const first = Array.from({ length: 3000 }, () => awaiting());
    for (const a of first) queue.push(a);
    const last = awaiting();
    queue.push(last);
    queue.frames(Buffer.from(':1\r\n'.repeat(3000)));
    expect(queue.length).toBe(1);
    expect((queue as unknown as { slots: unknown[] }).slots.length).toBeLessThan(100);
    queue.frames(Buffer.from(':9\r\n'));
    expect(last.got).toEqual([9]);
  });

  it('commands Redis refused in silence fail, and the next confirmation finds the order again, across any cut', () => {
    // Block 1 (a confirmation and a count) was refused while replies were off: no reply at all.
    // Block 2's replies: its +OK, its token, then two counts.
    const wire = Buffer.from('+OK\r\n$1\r\n2\r\n:1\r\n:0\r\n');
    for (let cut = 0; cut <= wire.length; cut++) {
      const lost: string[] = [];
      const queue = new ReplyQueue(
        60_000,
        () => {
          throw new Error('a frame nobody waited for');
        },
        (why) => lost.push(why),
      );
      const [m1, c1, m2, c2, c3] = [marker('1'), counted(), marker('2'), counted(), counted()];
      for (const a of [m1, c1, m2, c2, c3]) queue.push(a);
      const reader = new PushReader(undefined, (frames) => queue.frames(frames));
      reader.write(Buffer.from(wire.subarray(0, cut)));
      reader.write(Buffer.from(wire.subarray(cut)));
      expect(lost).toEqual([]);
      expect(m1.got).toHaveLength(1);
      expect(m1.got[0]).toBeInstanceOf(BusUnavailableError);
      expect(c1.got).toHaveLength(1);
      expect(c1.got[0]).toBeInstanceOf(BusUnavailableError);
      expect([m2.got, c2.got, c3.got]).toEqual([['2'], [1], [0]]);
      expect(queue.length).toBe(0);
    }
  });

  it('a refused block that timed out already is passed over without failing twice', async () => {
    const queue = new ReplyQueue(30);
    const [m1, c1] = [marker('1'), counted()];
    queue.push(m1);
    queue.push(c1);
    await expect.poll(() => c1.got.length, { timeout: 2000 }).toBe(1);
    const [m2, c2] = [marker('2'), counted()];
    queue.push(m2);
    queue.push(c2);
    queue.frames(Buffer.from('+OK\r\n$1\r\n2\r\n:1\r\n'));
    expect(m1.got).toHaveLength(1);
    expect(m1.got[0]).toBeInstanceOf(BusTimeoutError);
    expect(c1.got).toHaveLength(1);
    expect(c1.got[0]).toBeInstanceOf(BusTimeoutError);
    expect([m2.got, c2.got]).toEqual([['2'], [1]]);
    expect(queue.length).toBe(0);
  });

  it('a reply no command claims: the order is lost, every waiting command fails, and nothing more is read', () => {
    const lost: string[] = [];
    const other: string[] = [];
    const queue = new ReplyQueue(
      60_000,
      (b) => other.push(b.toString()),
      (why) => lost.push(why),
    );
    const [m1, c1] = [marker('1'), counted()];
    queue.push(m1);
    queue.push(c1);
    // The -BUSY of a CLIENT REPLY OFF refused while replies were on, where a confirmation waits.
    queue.frames(Buffer.from('-BUSY Redis is busy running a script\r\n+OK\r\n$1\r\n1\r\n:1\r\n'));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatch(/-BUSY Redis is busy/);
    expect(m1.got).toHaveLength(1);
    expect(m1.got[0]).toBeInstanceOf(BusUnavailableError);
    expect(c1.got).toHaveLength(1);
    expect(c1.got[0]).toBeInstanceOf(BusUnavailableError);
    const later = counted();
    queue.push(later);
    expect(later.got[0]).toBeInstanceOf(BusUnavailableError);
    queue.frames(Buffer.from(':1\r\n'));
    expect(other).toEqual([]);
    expect(lost).toHaveLength(1);
  });
});
