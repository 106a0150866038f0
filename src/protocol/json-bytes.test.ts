import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { bytesAre, decimalDigits, keptBytes, putDecimal, runAt, runOf } from './json-bytes.ts';

describe('runs: bytes compared four at a time', () => {
  it('finds a run exactly where its bytes are, whatever its length and its bytes', () => {
    // Bytes with the high bit set (a negative word), zeros, and every length up to three words
    // and a tail; the run put at each offset of a larger buffer (no word alignment).
    const pool = Buffer.from('\u0000\u00ff{"v":1,"t":"req"} é漢😀\u007f\u0080', 'utf8');
    for (let len = 0; len <= 14; len++)
      for (let from = 0; from + len <= pool.length; from += 3) {
        const bytes = pool.subarray(from, from + len);
        const run = runOf(bytes);
        expect(run.length).toBe(len);
        for (let at = 0; at < 5; at++) {
          const s = Buffer.concat([Buffer.alloc(at, 0x20), bytes, Buffer.from('tail')]);
          expect(runAt(s, at, run)).toBe(true);
          expect(runAt(s, at, run)).toBe(bytesAre(s, at, Array.from(bytes)));
          // Any one byte changed, by one bit or by all: no match, as bytesAre.
          for (let k = 0; k < len; k++)
            for (const flip of [0x01, 0x80, 0xff]) {
              const t = Buffer.from(s);
              t[at + k] ^= flip;
              expect(runAt(t, at, run), `${len} ${k} ${flip}`).toBe(false);
            }
        }
      }
  });

  it("makes a text's run from its UTF-8", () => {
    for (const text of ['', 'a', '{"v":1,', 'é漢😀 x']) expect(runOf(text)).toEqual(runOf(Buffer.from(text)));
  });

  it('matches nothing with a byte no buffer holds', () => {
    const never = runOf([0x100]);
    for (let b = 0; b < 256; b++) expect(runAt(Buffer.from([b, 1, 0, 0]), 0, never)).toBe(false);
    const tail = runOf([0x41, 0x100]);
    for (let b = 0; b < 256; b++) expect(runAt(Buffer.from([0x41, b]), 0, tail)).toBe(false);
  });
});

describe('keptBytes: encodings kept per key', () => {
  it('encodes each key once while keys take turns, and gives each its own bytes', () => {
    const encoded: string[] = [];
    const bytesOfKey = keptBytes((k) => {
      encoded.push(k);
      return `<${k}>`;
    });
    // Keys made anew each time (equal content, other string objects), taking turns.
    for (let round = 0; round < 3; round++)
      for (const k of ['a', 'ch:node:é', 'b']) expect(bytesOfKey(String(k)).toString('utf8')).toBe(`<${k}>`);
    expect(encoded).toEqual(['a', 'ch:node:é', 'b']);
  });

  it('keeps at most max keys, and stays right past that', () => {
    const encoded: string[] = [];
    const bytesOfKey = keptBytes((k) => {
      encoded.push(k);
      return k.toUpperCase();
    }, 2);
    for (const k of ['a', 'b', 'c', 'a', 'b']) expect(bytesOfKey(k).toString()).toBe(k.toUpperCase());
    // a and b kept; c starts the map again (c kept), a then b encoded again (the map full after a).
    expect(encoded).toEqual(['a', 'b', 'c', 'a', 'b']);
    expect(bytesOfKey('b').toString()).toBe('B');
    expect(encoded).toHaveLength(5);
  });
});

describe('decimal digits', () => {
  it('counts the digits of every non-negative safe integer as its text has them', () => {
    // Each side of every power of ten a safe integer reaches and of 2^31 (where putDecimal leaves
    // integer arithmetic), and numbers spread over the range.
    const ns = [0, Number.MAX_SAFE_INTEGER];
    ns.push(2 ** 31 - 1, 2 ** 31);
    for (let p = 10; p <= Number.MAX_SAFE_INTEGER; p *= 10) ns.push(p - 1, p, p + 1);
    for (let x = 1; x < Number.MAX_SAFE_INTEGER; x = Math.floor(x * 1.37) + 1) ns.push(x);
    for (const n of ns) {
      const text = String(n);
      expect(decimalDigits(n), text).toBe(text.length);
      const out = Buffer.alloc(text.length + 2, 0x2e);
      expect(putDecimal(out, 1, n, decimalDigits(n))).toBe(text.length);
      expect(out.toString('latin1')).toBe(`.${text}.`);
    }
  });
});
