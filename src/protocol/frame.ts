// Reading the phone's frames without paying for a full parse of large responses.
// A response (up to 256 KiB) only needs its top-level "id" found and swapped back to the
// client's id; requests and notifications from the phone are small and parsed whole.
// Frames stay UTF-8 bytes end to end: JSON's structural characters are ASCII and UTF-8
// never reuses ASCII bytes inside multi-byte sequences, so a byte scan is exact.
import type { JsonRpcId } from './jsonrpc.ts';
import { bytesAre, decimalDigits, integerAt, put, putDecimal, scanObject, skipWs } from './json-bytes.ts';

export type PhoneFrame =
  | { kind: 'response'; id: JsonRpcId | null; idStart: number; idEnd: number }
  | { kind: 'message'; value: unknown }
  | { kind: 'invalid'; reason: string };

// `{"result":…,"jsonrpc":"2.0","id":7}` is what the MCP SDK writes: the id is the last member.
const TAIL_ID = /,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|null)\s*\}\s*$/;
const FIRST_KEY = /^\s*\{\s*"(result|error)"\s*:/;
const PEEK = 256;

export function inspectPhoneFrame(frame: Buffer): PhoneFrame {
  // The common case without a string copy: a result or error first, a numeric id last (the
  // relay's own ids are numbers). Anything else takes the regexes below.
  const tail = startsWithResult(frame) ? tailNumericId(frame) : -1;
  if (tail >= 0) {
    let end = tail;
    while (isDigit(frame[end])) end++;
    const id = integerAt(frame, tail, end);
    return Number.isNaN(id) ? responseAt(frame, tail, end) : { kind: 'response', id, idStart: tail, idEnd: end };
  }
  // latin1 maps each byte to one char, so regex indexes are byte offsets.
  if (FIRST_KEY.test(frame.toString('latin1', 0, Math.min(PEEK, frame.length)))) {
    const offset = Math.max(0, frame.length - PEEK);
    const tail = TAIL_ID.exec(frame.toString('latin1', offset));
    if (tail) {
      const valueStart = offset + tail.index + tail[0].lastIndexOf(tail[1]);
      return responseAt(frame, valueStart, valueStart + tail[1].length);
    }
  }
  return scanTopLevel(frame);
}

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const RESULT = Buffer.from('"result"');
const ERROR = Buffer.from('"error"');

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

/** Walks the top-level members only; stops as soon as the kind (and a response's id) is known. */
function scanTopLevel(s: Buffer): PhoneFrame {
  let kind: 'message' | 'response' | undefined;
  const r = scanObject(s, skipWs(s, 0), (key, _span, members) => {
    if (key === 'method') kind = 'message';
    else if (
      (key === 'result' || key === 'error' || key === 'id') &&
      (members.has('result') || members.has('error')) &&
      members.has('id')
    )
      kind = 'response';
    return kind !== undefined;
  });
  if (!r.ok) return { kind: 'invalid', reason: r.reason };
  if (kind === 'message') return parseWhole(s);
  if (kind === 'response') {
    const id = r.members.get('id')!;
    return responseAt(s, id.start, id.end);
  }
  if (skipWs(s, r.end) !== s.length) return { kind: 'invalid', reason: 'trailing data' };
  if (r.members.size === 0) return { kind: 'invalid', reason: 'empty object' };
  return {
    kind: 'invalid',
    reason: r.members.has('result') || r.members.has('error') ? 'response without id' : 'no method, result or error',
  };
}

function parseWhole(s: Buffer): PhoneFrame {
  try {
    return { kind: 'message', value: JSON.parse(s.toString('utf8')) };
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
