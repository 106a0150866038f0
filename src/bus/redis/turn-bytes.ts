// A turn's commands for one socket, laid out as bytes as they come and written when the turn
// ends. Each piece is encoded straight into a slab kept from turn to turn: no string run to
// grow, count and encode again at the end (the cost of building RESP as strings: a
// concatenation per piece, the run flattened and counted once more before it is encoded), and
// one write per turn where the socket's own cork would keep every piece as a chunk of its own
// (a `write` each, then a `writev` that converts them one by one).
import { Buffer } from 'node:buffer';
import type { Socket } from 'node:net';

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
 * never written over; a full slab is left to them and a new one taken. @internal
 */
export class TurnBytes {
  private slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
  /** Where this turn's bytes in the slab begin. */
  private start = 0;
  /** Where the next byte goes. */
  private at = 0;
  /** This turn's bytes before the slab's: an earlier slab's part, large payloads, in order. */
  private chunks: Buffer[] = [];

  /** @param socket Where flush() writes; the owner sets it when a turn begins. */
  constructor(public socket?: Socket) {}

  /** Whether this turn has nothing to write yet. */
  get empty(): boolean {
    return this.at === this.start && this.chunks.length === 0;
  }

  add(text: string): void {
    const most = text.length * 3; // UTF-8 bytes per UTF-16 unit, at most
    if (this.at + most > this.slab.length) this.nextSlab(most);
    this.at += this.slab.write(text, this.at);
  }

  addPayload(payload: Buffer): void {
    const n = payload.length;
    if (n >= WRITE_PAYLOADS_FROM) {
      this.cut();
      this.chunks.push(payload);
      return;
    }
    if (this.at + n > this.slab.length) this.nextSlab(n);
    this.at += payload.copy(this.slab, this.at);
  }

  /** A bulk string's length line, `$<n>\r\n`, written digit by digit (no string made). */
  addBulkLength(n: number): void {
    if (this.at + 24 > this.slab.length) this.nextSlab(24);
    const s = this.slab;
    let at = this.at;
    s[at++] = DOLLAR;
    let digits = 1;
    for (let m = n; m >= 10; m = Math.floor(m / 10)) digits++;
    for (let i = at + digits - 1, m = n; i >= at; i--, m = Math.floor(m / 10)) s[i] = 0x30 + (m % 10);
    at += digits;
    s[at++] = CR;
    s[at++] = LF;
    this.at = at;
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

  /** The slab's bytes of this turn so far, handed out: the next begin after them. */
  private take(): Buffer {
    const view = this.slab.subarray(this.start, this.at);
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
    this.start = this.at = 0;
  }
}
