// A scanner for JSON objects held as UTF-8 bytes: finds top-level members and their value
// spans without parsing or allocating the values. JSON's structural characters are ASCII and
// UTF-8 never reuses ASCII bytes inside multi-byte sequences, so a byte scan is exact.
// Used to restore ids (frame.ts) and to splice members into results (stateless.ts).
import { Buffer } from 'node:buffer';
import { setBytes, spanOf } from './byte-calls.ts';

export const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COMMA = 0x2c,
  COLON = 0x3a;
export const OPEN_OBJ = 0x7b,
  CLOSE_OBJ = 0x7d,
  OPEN_ARR = 0x5b,
  CLOSE_ARR = 0x5d;

export interface Span {
  start: number;
  end: number;
}

/**
 * `make(key)`, kept per key: for what a process makes again and again for few keys. The last key
 * is compared first (mostly the same string object: a pointer's compare); the others wait in a
 * map, so that keys taking turns (a node's messages to several peers, a client's methods) are
 * not made again at each change. At most `max` keys are kept (past that the map starts again:
 * peers come and go, a client picks its methods).
 */
export function keptPerKey<V>(make: (key: string) => V, max: number): (key: string) => V {
  let last: string | undefined;
  let value!: V;
  const kept = new Map<string, V>();
  return (key) => {
    if (key === last) return value;
    let v = kept.get(key);
    if (v === undefined) {
      if (kept.size >= max) kept.clear();
      kept.set(key, (v = make(key)));
    }
    last = key;
    return (value = v);
  };
}

/**
 * `encode(key)` as UTF-8 bytes, kept per key (keptPerKey): for what a process encodes again and
 * again for few keys (its public host, a forwarded method, its peers' channels), which costs
 * more through the runtime's encoding each time than a compare of the key.
 */
export function keptBytes(encode: (key: string) => string, max = 64): (key: string) => Buffer {
  return keptPerKey((key) => Buffer.from(encode(key)), max);
}

/** A constant's bytes (its UTF-8) for bytesAre: a plain array, not a Buffer. */
export function bytesOf(text: string): readonly number[] {
  return Array.from(Buffer.from(text));
}

/**
 * Whether s[at, at + word.length) is `word`. Words are plain arrays (bytesOf; a copy of received
 * bytes through Array.from), not Buffers: a typed array's length and elements load with more
 * checks than an array's (a request read in 9.0 thousand instructions against 9.35 with Buffers,
 * a cross-node request's header in 10.1 against 11.7; docs/BENCHMARKS.md, "Instructions per
 * call under callgrind" and "The cross-node call in instructions").
 */
export function bytesAre(s: Buffer, at: number, word: readonly number[]): boolean {
  for (let k = 0; k < word.length; k++) if (s[at + k] !== word[k]) return false;
  return true;
}

/**
 * Bytes to find again and again in received bytes (a header's run that repeats), held as
 * 32-bit words: runAt compares four bytes at a time, about 10 instructions a byte against
 * bytesAre's 16 (a 240-byte run in a loop under callgrind: 2.4 against 3.9 thousand; a
 * runtime compare, Buffer#compare, costs 1.4 thousand whatever the length).
 */
export interface Run {
  /** Little-endian words of four bytes; the last 1–3 bytes, if any, in a last word, zero above. */
  readonly words: readonly number[];
  readonly length: number;
}

/** The Run of `bytes`, or of a text's UTF-8 (a byte may be 0x100: a run that matches nothing). */
export function runOf(from: ArrayLike<number> | string): Run {
  const bytes = typeof from === 'string' ? Buffer.from(from) : from;
  const words: number[] = [];
  for (let k = 0; k < bytes.length; k += 4) {
    let w = 0;
    for (let j = 0; j < 4 && k + j < bytes.length; j++) w |= bytes[k + j] << (8 * j);
    words.push(w);
  }
  return { words, length: bytes.length };
}

/** Whether s[at, at + run.length) is `run`'s bytes; the caller knows they are within s. */
export function runAt(s: Buffer, at: number, run: Run): boolean {
  const w = run.words;
  const whole = run.length >> 2;
  let i = at;
  for (let j = 0; j < whole; j++, i += 4)
    if ((s[i] | (s[i + 1] << 8) | (s[i + 2] << 16) | (s[i + 3] << 24)) !== w[j]) return false;
  const rest = run.length & 3;
  if (rest === 0) return true;
  let t = s[i];
  if (rest > 1) t |= s[i + 1] << 8;
  if (rest > 2) t |= s[i + 2] << 16;
  return t === w[whole];
}

/**
 * Copies src[from, to) into out at o; returns the bytes copied. Spans up to 16 bytes are copied
 * here: a copy by the runtime costs a call into it, more than the bytes of a member name; from
 * a few dozen bytes on (a caller context, an answer's head) the runtime's memcpy is the cheaper
 * (docs/decisions/0241-the-request-path-without-runtime-calls.md, amended). Through
 * `Uint8Array#set`, not `Buffer#copy`: the latter checks its arguments in JavaScript and makes
 * a view of the span even for a whole buffer (a whole 90-byte buffer 682 instructions with
 * `copy`, 530 with `set`; a span of one 1,254 and 1,045); `set` and the view's parts read once
 * (src/protocol/byte-calls.ts).
 */
export function put(src: Buffer, from: number, to: number, out: Buffer, o: number): number {
  const n = to - from;
  if (n > 16) {
    setBytes.call(out, from === 0 && to === src.length ? src : spanOf(src, from, n), o);
    return n;
  }
  for (let k = 0; k < n; k++) out[o + k] = src[from + k];
  return n;
}

/**
 * The integer s[start, end) holds if it is written as JSON writes one (`-` for a negative, no
 * leading zero, 1 to 15 digits: exact in a double, as JSON.parse reads it, -0 included); NaN
 * for anything else, which the caller leaves to JSON.parse.
 */
export function integerAt(s: Buffer, start: number, end: number): number {
  const first = s[start] === 0x2d ? start + 1 : start;
  const digits = end - first;
  if (digits < 1 || digits > 15 || (s[first] === 0x30 && digits > 1)) return NaN;
  let n = 0;
  for (let i = first; i < end; i++) {
    const d = s[i] - 0x30;
    if (d < 0 || d > 9) return NaN;
    n = n * 10 + d;
  }
  return first === start ? n : -n;
}

/** The number of decimal digits of a non-negative safe integer (a relay id, a client's id). */
export function decimalDigits(n: number): number {
  // Compares, not divisions: most numbers here (ids, lengths) are below 10^10.
  if (n < 1e5) return n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 10000 ? 4 : 5;
  if (n < 1e10) return n < 1e6 ? 6 : n < 1e7 ? 7 : n < 1e8 ? 8 : n < 1e9 ? 9 : 10;
  let d = 11;
  for (let m = 1e11; n >= m; m *= 10) d++;
  return d;
}

/**
 * Writes the non-negative integer `n` (`digits` long) in decimal at out[o]; returns `digits`.
 * Below 2^31 in 32-bit integer arithmetic, whose division by 10 the compiler makes a
 * multiplication; above, in floating point (docs/BENCHMARKS.md, "Channels made once, the clock
 * read once, header lines as bytes").
 */
export function putDecimal(out: Buffer, o: number, n: number, digits: number): number {
  if (n <= 0x7fffffff)
    for (let k = o + digits - 1, m = n | 0; k >= o; k--) {
      const q = (m / 10) | 0;
      out[k] = 0x30 + m - q * 10;
      m = q;
    }
  else
    for (let k = o + digits - 1; k >= o; k--) {
      const q = Math.floor(n / 10);
      out[k] = 0x30 + (n - q * 10);
      n = q;
    }
  return digits;
}

export function skipWs(s: Buffer, i: number): number {
  while (s[i] === 0x20 || s[i] === 0x0a || s[i] === 0x0d || s[i] === 0x09) i++;
  return i;
}

/** s[i] is a quote; returns the index after the closing quote, or -1. */
export function skipString(s: Buffer, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = s.indexOf(QUOTE, from);
    if (q < 0) return -1;
    let backslashes = 0;
    for (let k = q - 1; k > i && s[k] === BACKSLASH; k--) backslashes++;
    if (backslashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/** The index after the value starting at s[i], or -1 if it is malformed. */
export function skipValue(s: Buffer, i: number): number {
  const c = s[i];
  if (c === QUOTE) return skipString(s, i);
  if (c === OPEN_OBJ || c === OPEN_ARR) {
    let depth = 0;
    for (let j = i; j < s.length; j++) {
      const d = s[j];
      if (d === QUOTE) {
        j = skipString(s, j) - 1;
        if (j < 0) return -1;
      } else if (d === OPEN_OBJ || d === OPEN_ARR) depth++;
      else if (d === CLOSE_OBJ || d === CLOSE_ARR) {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    return -1;
  }
  let j = i;
  while (j < s.length) {
    const d = s[j];
    if (d === COMMA || d === CLOSE_OBJ || d === CLOSE_ARR || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09)
      break;
    j++;
  }
  return j > i ? j : -1;
}

export type ScanResult =
  { ok: true; members: Map<string, Span>; end: number; stopped: boolean } | { ok: false; reason: string };

/**
 * The members of the object at s[i] (`{`). `visit` sees each member as it is found and may
 * stop the scan early by returning true (then `stopped` is set and `end` is where it stopped).
 */
export function scanObject(
  s: Buffer,
  i: number,
  visit?: (key: string, value: Span, members: Map<string, Span>) => boolean,
): ScanResult {
  if (s[i] !== OPEN_OBJ) return { ok: false, reason: 'not a JSON object' };
  const members = new Map<string, Span>();
  i = skipWs(s, i + 1);
  if (s[i] === CLOSE_OBJ) return { ok: true, members, end: i + 1, stopped: false };
  for (;;) {
    if (s[i] !== QUOTE) return { ok: false, reason: 'expected a member name' };
    const keyEnd = skipString(s, i);
    if (keyEnd < 0) return { ok: false, reason: 'unterminated string' };
    // Member names the relay looks for are plain ASCII; escaped names are decoded properly.
    let key = s.toString('latin1', i + 1, keyEnd - 1);
    if (key.includes('\\')) {
      try {
        key = JSON.parse(s.toString('utf8', i, keyEnd)) as string;
      } catch {
        return { ok: false, reason: 'malformed member name' };
      }
    }
    i = skipWs(s, keyEnd);
    if (s[i] !== COLON) return { ok: false, reason: 'expected ":"' };
    i = skipWs(s, i + 1);
    const end = skipValue(s, i);
    if (end < 0) return { ok: false, reason: 'malformed value' };
    const span = { start: i, end };
    members.set(key, span);
    if (visit?.(key, span, members)) return { ok: true, members, end, stopped: true };
    i = skipWs(s, end);
    if (s[i] === COMMA) {
      i = skipWs(s, i + 1);
      continue;
    }
    if (s[i] === CLOSE_OBJ) return { ok: true, members, end: i + 1, stopped: false };
    return { ok: false, reason: 'expected "," or "}"' };
  }
}
