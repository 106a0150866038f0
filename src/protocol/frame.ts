// Reading the phone's frames without paying for a full parse of large responses.
// A response (up to 256 KiB) only needs its top-level "id" found and swapped back to the
// client's id; requests and notifications from the phone are small and parsed whole.
// Frames stay UTF-8 bytes end to end: JSON's structural characters are ASCII and UTF-8
// never reuses ASCII bytes inside multi-byte sequences, so a byte scan is exact.
//
// A response is forwarded only if it is one whole JSON object: its top-level braces close at
// its last non-whitespace byte. That catches a frame cut short anywhere and anything but
// whitespace after the object, with one pass over the bytes (strings and nesting tracked, no
// parse: docs/decisions/0130-byte-level-requests.md). It does not catch corruption inside a
// value (`{"result":tru,"id":7}` closes properly): only a full parse would, and 0130 chose not to.
import { Buffer } from 'node:buffer';
import { parseJson } from './exact-json.ts';
import type { JsonRpcId } from './jsonrpc.ts';
import {
  bytesAre,
  bytesOf,
  decimalDigits,
  integerAt,
  put,
  putDecimal,
  scanObject,
  skipWs,
  type Span,
} from './json-bytes.ts';

export type PhoneFrame =
  | {
      kind: 'response';
      id: JsonRpcId | null;
      idStart: number;
      idEnd: number;
      /** Asked not to (inspectPhoneFrame's `checkWhole`): not yet known to be one whole object. */
      unchecked?: true;
    }
  | { kind: 'message'; value: unknown }
  /**
   * `id`: for a response that is not one whole JSON object (cut short, or with trailing data),
   * its top-level id when that was read whole, so its call can fail at once.
   */
  | { kind: 'invalid'; reason: string; id?: JsonRpcId };

// `{"result":…,"jsonrpc":"2.0","id":7}` is what the MCP SDK writes: the id is the last member.
const TAIL_ID = /,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|null)\s*\}\s*$/;
const FIRST_KEY = /^\s*\{\s*"(result|error)"\s*:/;
const PEEK = 256;

/**
 * What a phone's frame is. `checkWhole` false leaves the scan to the close undone on the common
 * path (a response with a numeric id last, marked `unchecked`), for a caller whose request's
 * answer is checked by its own reader: finish with checkedWhole otherwise.
 */
export function inspectPhoneFrame(frame: Buffer, checkWhole = true): PhoneFrame {
  // The common case without a string copy: a result or error first, a numeric id last (the
  // relay's own ids are numbers). Anything else takes the regexes below.
  const tail = startsWithResult(frame) ? tailNumericId(frame) : -1;
  if (tail >= 0) {
    // The ends look right; the scan to the close checks everything between.
    if (checkWhole && !isWholeObject(frame)) return scanTopLevel(frame);
    let end = tail;
    while (isDigit(frame[end])) end++;
    const id = integerAt(frame, tail, end);
    if (Number.isNaN(id))
      return checkWhole || isWholeObject(frame) ? responseAt(frame, tail, end) : scanTopLevel(frame);
    return checkWhole
      ? { kind: 'response', id, idStart: tail, idEnd: end }
      : { kind: 'response', id, idStart: tail, idEnd: end, unchecked: true };
  }
  // latin1 maps each byte to one char, so regex indexes are byte offsets.
  if (FIRST_KEY.test(frame.toString('latin1', 0, Math.min(PEEK, frame.length)))) {
    const offset = Math.max(0, frame.length - PEEK);
    const tail = TAIL_ID.exec(frame.toString('latin1', offset));
    if (tail) {
      if (!isWholeObject(frame)) return scanTopLevel(frame);
      const valueStart = offset + tail.index + tail[0].lastIndexOf(tail[1]);
      return responseAt(frame, valueStart, valueStart + tail[1].length);
    }
  }
  return scanTopLevel(frame);
}

/** `f`, an `unchecked` response of inspectPhoneFrame, as inspectPhoneFrame would have read it with the check. */
export function checkedWhole(frame: Buffer, f: PhoneFrame): PhoneFrame {
  return isWholeObject(frame) ? f : scanTopLevel(frame);
}

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const RESULT = bytesOf('"result"');
const ERROR = bytesOf('"error"');

/** `{` then `"result"` or `"error"` then `:`, JSON whitespace between (a subset of FIRST_KEY). */
function startsWithResult(s: Buffer): boolean {
  let i = 0;
  while (isWs(s[i])) i++;
  if (s[i++] !== 0x7b) return false;
  while (isWs(s[i])) i++;
  const name = s[i + 1] === 0x72 ? RESULT : ERROR;
  if (i + name.length > s.length || !bytesAre(s, i, name)) return false;
  i += name.length;
  while (isWs(s[i])) i++;
  return s[i] === 0x3a;
}

/** Where `,"id":<digits>}` at the very end has its digits (a subset of TAIL_ID), or -1. */
function tailNumericId(s: Buffer): number {
  let j = s.length - 1;
  while (j > 0 && isWs(s[j])) j--;
  if (s[j--] !== 0x7d) return -1;
  while (j > 0 && isWs(s[j])) j--;
  const last = j;
  while (j > 0 && isDigit(s[j])) j--;
  if (j === last) return -1;
  const start = j + 1;
  if (s[j] === 0x2d) return -1; // a negative id is not ours: the regex path reads it
  while (j > 0 && isWs(s[j])) j--;
  if (s[j--] !== 0x3a) return -1;
  while (j > 0 && isWs(s[j])) j--;
  if (s[j] !== 0x22 || s[j - 1] !== 0x64 || s[j - 2] !== 0x69 || s[j - 3] !== 0x22) return -1;
  j -= 4;
  while (j > 0 && isWs(s[j])) j--;
  return s[j] === 0x2c ? start : -1;
}

function responseAt(s: Buffer, start: number, end: number): PhoneFrame {
  let id: unknown;
  try {
    id = JSON.parse(s.toString('utf8', start, end));
  } catch {
    return { kind: 'invalid', reason: 'malformed id' };
  }
  if (id !== null && typeof id !== 'string' && typeof id !== 'number')
    return { kind: 'invalid', reason: 'bad id type' };
  return { kind: 'response', id, idStart: start, idEnd: end };
}

/** Whether the frame is one object closed at its last non-whitespace byte. */
function isWholeObject(s: Buffer): boolean {
  const end = closeOf(s, skipWs(s, 0));
  return end > 0 && skipWs(s, end) === s.length;
}

// The structural bytes as this module's own constants: in a per-byte loop an imported binding
// costs twice as much in plain ESM and over ten times as much under tsx, which runs the sources.
const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COMMA = 0x2c,
  OPEN_OBJ = 0x7b,
  CLOSE_OBJ = 0x7d,
  OPEN_ARR = 0x5b;

/** Up to this many bytes of a string are looked at here; the rest of a longer one is found by indexOf. */
const SHORT_STRING = 64;

/**
 * The index after the object or array that opens at s[i], or -1 if none does or the frame ends
 * first. One pass that follows strings (and their escapes) and nesting only; no value is read.
 */
function closeOf(s: Buffer, i: number): number {
  if (s[i] !== OPEN_OBJ && s[i] !== OPEN_ARR) return -1;
  const n = s.length;
  let depth = 0;
  for (let j = i; j < n; j++) {
    const c = s[j];
    if (c < QUOTE) continue; // whitespace
    if (c === QUOTE) {
      // A short string here (one compare for most bytes: both bytes that matter are below
      // 0x5d); a long one's rest (a base64 image) by memchr.
      let k = j + 1;
      const stop = k + SHORT_STRING < n ? k + SHORT_STRING : n;
      for (; k < stop; k++) {
        const d = s[k];
        if (d > BACKSLASH) continue;
        if (d === QUOTE) break;
        if (d === BACKSLASH) k++;
      }
      j = k < stop ? k : k < n ? longStringEnd(s, k) : -1;
      if (j < 0) return -1;
    } else if ((c | 0x20) === OPEN_OBJ)
      depth++; // `{` or `[`
    else if ((c | 0x20) === CLOSE_OBJ && --depth === 0) return j + 1; // `}` or `]`
  }
  return -1;
}

/** The index of the quote that closes a string whose bytes from s[from] on are not escaped, or -1. */
function longStringEnd(s: Buffer, from: number): number {
  for (;;) {
    const q = s.indexOf(QUOTE, from);
    if (q < 0) return -1;
    let backslashes = 0;
    for (let k = q - 1; k >= from && s[k] === BACKSLASH; k--) backslashes++;
    if (backslashes % 2 === 0) return q;
    from = q + 1;
  }
}

/**
 * Walks the top-level members: a request or notification only until `method` is found (it is
 * parsed whole), a response to its closing brace, so that one cut short or followed by anything
 * but whitespace is refused like any other malformed frame.
 */
function scanTopLevel(s: Buffer): PhoneFrame {
  let kind: 'message' | 'response' | undefined;
  let seen: Map<string, Span> | undefined;
  let lastEnd = 0;
  const r = scanObject(s, skipWs(s, 0), (key, span, members) => {
    seen = members;
    lastEnd = span.end;
    if (kind === undefined) {
      if (key === 'method') kind = 'message';
      else if (
        (key === 'result' || key === 'error' || key === 'id') &&
        (members.has('result') || members.has('error')) &&
        members.has('id')
      )
        kind = 'response';
    }
    return kind === 'message';
  });
  if (kind === 'message') return parseWhole(s);
  if (!r.ok) return invalidWithId(r.reason, cutResponseId(s, seen, lastEnd));
  if (skipWs(s, r.end) !== s.length)
    return invalidWithId('trailing data', kind === 'response' ? idOf(s, r.members) : undefined);
  if (kind === 'response') {
    const id = r.members.get('id')!;
    return responseAt(s, id.start, id.end);
  }
  if (r.members.size === 0) return { kind: 'invalid', reason: 'empty object' };
  return {
    kind: 'invalid',
    reason: r.members.has('result') || r.members.has('error') ? 'response without id' : 'no method, result or error',
  };
}

/**
 * The id of a response cut short, if it was read whole: an id member followed by more of the
 * frame (digits at the very end may be the start of a longer id), and a `result` or `error`
 * member read or begun (so the id is the relay's, not that of a request from the phone).
 */
function cutResponseId(s: Buffer, members: Map<string, Span> | undefined, lastEnd: number): JsonRpcId | undefined {
  const id = members?.get('id');
  if (!id || id.end >= s.length) return undefined;
  if (members!.has('result') || members!.has('error')) return idOf(s, members!);
  let i = skipWs(s, lastEnd);
  if (s[i] !== COMMA) return undefined;
  i = skipWs(s, i + 1);
  return bytesAre(s, i, RESULT) || bytesAre(s, i, ERROR) ? idOf(s, members!) : undefined;
}

const invalidWithId = (reason: string, id: JsonRpcId | undefined): PhoneFrame =>
  id === undefined ? { kind: 'invalid', reason } : { kind: 'invalid', reason, id };

function idOf(s: Buffer, members: Map<string, Span>): JsonRpcId | undefined {
  const span = members.get('id');
  const f = span ? responseAt(s, span.start, span.end) : undefined;
  return f?.kind === 'response' && f.id !== null ? f.id : undefined;
}

function parseWhole(s: Buffer): PhoneFrame {
  try {
    return { kind: 'message', value: parseJson(s.toString('utf8')) };
  } catch {
    return { kind: 'invalid', reason: 'malformed JSON' };
  }
}

const allocUnsafe = (bytes: number) => Buffer.allocUnsafe(bytes);

/** The frame with the id value at [start, end) replaced by the client's own id: one copy (into `alloc`'s buffer). */
export function withId(
  frame: Buffer,
  start: number,
  end: number,
  id: JsonRpcId | null,
  alloc: (bytes: number) => Buffer = allocUnsafe,
): Buffer {
  // A non-negative integer id (what clients mostly send) is written as its digits here;
  // any other id's JSON is written straight into the answer: no Buffer of its own.
  const digits = typeof id === 'number' && Number.isSafeInteger(id) && id >= 0 ? decimalDigits(id) : 0;
  const idJson = digits > 0 ? '' : JSON.stringify(id);
  const idLength = digits > 0 ? digits : Buffer.byteLength(idJson, 'utf8');
  const out = alloc(frame.length - (end - start) + idLength);
  put(frame, 0, start, out, 0);
  if (digits > 0) putDecimal(out, start, id as number, digits);
  else out.write(idJson, start, idLength, 'utf8');
  put(frame, end, frame.length, out, start + idLength);
  return out;
}
