// A turn's commands for one socket, laid out as bytes as they come and written when the turn
// ends. Each piece is encoded straight into a slab kept from turn to turn: no string run to
// grow, count and encode again at the end (the cost of building RESP as strings: a
// concatenation per piece, the run flattened and counted once more before it is encoded), and
// one write per turn where the socket's own cork would keep every piece as a chunk of its own
// (a `write` each, then a `writev` that converts them one by one).
import { Buffer } from 'node:buffer';
import type { Socket } from 'node:net';
import { setBytes, writeUtf8 } from '../../protocol/byte-calls.ts';
import { decimalDigits, put, putDecimal } from '../../protocol/json-bytes.ts';

/** A slab's size: a turn's bytes fit many times over; a larger turn takes one of its size. */
const SLAB_BYTES = 64 * 1024;
/** Payloads from this size are written as they are, beside the slab's bytes, not copied. */
const WRITE_PAYLOADS_FROM = 16 * 1024;
const DOLLAR = 0x24;
const CR = 0x0d;
const LF = 0x0a;

/**
 * One socket's bytes of the turn under way. A slab's bytes before `start` have been handed to
 * the socket, which may still hold them (a write the kernel did not take at once): they are
 * never written over; a full slab is left to them and a new one taken.
 *
 * What each piece costs decides how it is written (instructions, counted under callgrind in a
 * warm loop): encoding a string is a call into C++ (about 1,000 whatever its length), so the
 * pieces known in advance are kept as bytes and copied (`TypedArray#set`, about 300), a line
 * end is two stores, a length is written digit by digit, and a bulk string's first part is
 * encoded once, its length taken from what was written (`Buffer.byteLength` first is another
 * 650). The turn's bytes leave as a view made from the slab's ArrayBuffer (about 550; a
 * `subarray` reads the `buffer` getter, a call into C++: about 900). @internal
 */
export class TurnBytes {
  private slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
  private slabBuffer = this.slab.buffer;
  /** Where this turn's bytes in the slab begin. */
  private start = 0;
  /** Where the next byte goes. */
  private at = 0;
  /** This turn's bytes before the slab's: an earlier slab's part, large payloads, in order. */
  private chunks: Buffer[] = [];

  /** @param socket Where flush() writes; the owner sets it when a turn begins. */
  constructor(public socket?: Socket) {}

  /** Text, as UTF-8. */
  add(text: string): void {
    const most = text.length * 3; // UTF-8 bytes per UTF-16 unit, at most
    if (this.at + most > this.slab.length) this.nextSlab(most);
    this.at += writeUtf8.call(this.slab, text, this.at, this.slab.length - this.at);
  }

  /** Bytes made in advance (a command's fixed part). */
  addBytes(bytes: Uint8Array): void {
    const n = bytes.length;
    if (this.at + n > this.slab.length) this.nextSlab(n);
    setBytes.call(this.slab, bytes, this.at);
    this.at += n;
  }

  /** `\r\n` */
  addLineEnd(): void {
    if (this.at + 2 > this.slab.length) this.nextSlab(2);
    this.slab[this.at++] = CR;
    this.slab[this.at++] = LF;
  }

  addPayload(payload: Buffer): void {
    const n = payload.length;
    if (n >= WRITE_PAYLOADS_FROM) {
      this.cut();
      this.chunks.push(payload);
      return;
    }
    if (this.at + n > this.slab.length) this.nextSlab(n);
    setBytes.call(this.slab, payload, this.at);
    this.at += n;
  }

  /**
   * A bulk string's length line and its first part, `text`, whose `more` bytes follow (added
   * next): `$<n>\r\n` + text, n = text's UTF-8 bytes + `more`. Returns n.
   */
  addBulkStart(text: string, more: number): number {
    const most = 16 + text.length * 3;
    if (this.at + most > this.slab.length) this.nextSlab(most);
    const s = this.slab;
    // Written as if each character were one byte (the headers here are ASCII), put right after.
    const guess = text.length + more;
    const textAt = this.lengthLineAt(this.at, guess);
    const written = writeUtf8.call(s, text, textAt, s.length - textAt);
    if (written === text.length) {
      this.at = textAt + written;
      return guess;
    }
    const n = written + more;
    const shift = decimalDigits(n) - decimalDigits(guess);
    if (shift !== 0) s.copyWithin(textAt + shift, textAt, textAt + written);
    this.lengthLineAt(this.at, n);
    this.at = textAt + shift + written;
    return n;
  }

  /**
   * addBulkStart for a first part made of bytes kept in advance with numbers between them:
   * texts[0], the decimal digits of numbers[0], texts[1], …, the last text (one more text than
   * numbers; the numbers non-negative safe integers). No string is made or encoded.
   * Returns the bulk string's length.
   */
  addNumberedBulkStart(texts: readonly Buffer[], numbers: readonly number[], more: number): number {
    let text = texts[numbers.length].length;
    for (let k = 0; k < numbers.length; k++) text += texts[k].length + decimalDigits(numbers[k]);
    const most = 16 + text;
    if (this.at + most > this.slab.length) this.nextSlab(most);
    const s = this.slab;
    const total = text + more;
    let at = this.lengthLineAt(this.at, total);
    for (let k = 0; k < numbers.length; k++) {
      at += put(texts[k], 0, texts[k].length, s, at);
      const n = numbers[k];
      at += putDecimal(s, at, n, decimalDigits(n));
    }
    const last = texts[numbers.length];
    this.at = at + put(last, 0, last.length, s, at);
    return total;
  }

  /** Writes the turn's bytes (none when the socket has closed since), and begins the next. */
  flush(): void {
    const s = this.socket;
    if (!s || s.destroyed) return this.discard();
    if (this.chunks.length === 0) {
      if (this.at > this.start) s.write(this.take());
      return;
    }
    this.cut();
    const chunks = this.chunks;
    this.chunks = [];
    s.cork();
    for (const c of chunks) s.write(c);
    s.uncork();
  }

  /** Forgets the turn's bytes: its socket has gone. */
  discard(): void {
    this.chunks = [];
    this.at = this.start;
  }

  /** `$<n>\r\n` at `at` (room checked by the caller); where it ends. */
  private lengthLineAt(at: number, n: number): number {
    const s = this.slab;
    s[at++] = DOLLAR;
    at += putDecimal(s, at, n, decimalDigits(n));
    s[at++] = CR;
    s[at++] = LF;
    return at;
  }

  /** The slab's bytes of this turn so far, handed out: the next begin after them. */
  private take(): Buffer {
    const view = Buffer.from(this.slabBuffer, this.start, this.at - this.start);
    this.start = this.at;
    return view;
  }

  /** The slab's bytes so far become a chunk of their own. */
  private cut(): void {
    if (this.at > this.start) this.chunks.push(this.take());
  }

  private nextSlab(need: number): void {
    this.cut();
    this.slab = Buffer.allocUnsafeSlow(Math.max(SLAB_BYTES, need));
    this.slabBuffer = this.slab.buffer;
    this.start = this.at = 0;
  }
}
