// Reading the phone's frames without paying for a full parse of large responses.
// A response (up to 256 KiB) only needs its top-level "id" found and swapped back to the
// client's id; requests and notifications from the phone are small and parsed whole.
// Frames stay UTF-8 bytes end to end: JSON's structural characters are ASCII and UTF-8
// never reuses ASCII bytes inside multi-byte sequences, so a byte scan is exact.
import type { JsonRpcId } from './jsonrpc.ts';

export type PhoneFrame =
  | { kind: 'response'; id: JsonRpcId | null; idStart: number; idEnd: number }
  | { kind: 'message'; value: unknown }
  | { kind: 'invalid'; reason: string };

// `{"result":…,"jsonrpc":"2.0","id":7}` is what the MCP SDK writes: the id is the last member.
const TAIL_ID = /,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|null)\s*\}\s*$/;
const FIRST_KEY = /^\s*\{\s*"(result|error)"\s*:/;
const PEEK = 256;

const QUOTE = 0x22, BACKSLASH = 0x5c, COMMA = 0x2c, COLON = 0x3a;
const OPEN_OBJ = 0x7b, CLOSE_OBJ = 0x7d, OPEN_ARR = 0x5b, CLOSE_ARR = 0x5d;

export function inspectPhoneFrame(frame: Buffer): PhoneFrame {
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

function responseAt(s: Buffer, start: number, end: number): PhoneFrame {
  let id: unknown;
  try {
    id = JSON.parse(s.toString('utf8', start, end));
  } catch {
    return { kind: 'invalid', reason: 'malformed id' };
  }
  if (id !== null && typeof id !== 'string' && typeof id !== 'number') return { kind: 'invalid', reason: 'bad id type' };
  return { kind: 'response', id, idStart: start, idEnd: end };
}

/** Walks the top-level members only; nested values are skipped, strings with indexOf. */
function scanTopLevel(s: Buffer): PhoneFrame {
  let i = skipWs(s, 0);
  if (s[i] !== OPEN_OBJ) return { kind: 'invalid', reason: 'not a JSON object' };
  i = skipWs(s, i + 1);
  if (s[i] === CLOSE_OBJ) return { kind: 'invalid', reason: 'empty object' };
  let idSpan: [number, number] | undefined;
  let isResponse = false;
  for (;;) {
    if (s[i] !== QUOTE) return { kind: 'invalid', reason: 'expected a member name' };
    const keyEnd = skipString(s, i);
    if (keyEnd < 0) return { kind: 'invalid', reason: 'unterminated string' };
    const key = keyEnd - i <= 10 ? s.toString('latin1', i + 1, keyEnd - 1) : '';
    i = skipWs(s, keyEnd);
    if (s[i] !== COLON) return { kind: 'invalid', reason: 'expected ":"' };
    i = skipWs(s, i + 1);
    const valueStart = i;
    const valueEnd = skipValue(s, i);
    if (valueEnd < 0) return { kind: 'invalid', reason: 'malformed value' };
    if (key === 'method') return parseWhole(s);
    if (key === 'id') idSpan = [valueStart, valueEnd];
    else if (key === 'result' || key === 'error') isResponse = true;
    if (isResponse && idSpan) return responseAt(s, idSpan[0], idSpan[1]);
    i = skipWs(s, valueEnd);
    if (s[i] === COMMA) {
      i = skipWs(s, i + 1);
      continue;
    }
    if (s[i] === CLOSE_OBJ) break;
    return { kind: 'invalid', reason: 'expected "," or "}"' };
  }
  if (skipWs(s, i + 1) !== s.length) return { kind: 'invalid', reason: 'trailing data' };
  return { kind: 'invalid', reason: isResponse ? 'response without id' : 'no method, result or error' };
}

function parseWhole(s: Buffer): PhoneFrame {
  try {
    return { kind: 'message', value: JSON.parse(s.toString('utf8')) };
  } catch {
    return { kind: 'invalid', reason: 'malformed JSON' };
  }
}

function skipWs(s: Buffer, i: number): number {
  for (;;) {
    const c = s[i];
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return i;
  }
}

/** s[i] is a quote; returns the index after the closing quote, or -1. */
function skipString(s: Buffer, i: number): number {
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

function skipValue(s: Buffer, i: number): number {
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
    if (d === COMMA || d === CLOSE_OBJ || d === CLOSE_ARR || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
    j++;
  }
  return j > i ? j : -1;
}

/** The frame with the id value at [start, end) replaced by the client's own id: one copy. */
export function withId(frame: Buffer, start: number, end: number, id: JsonRpcId | null): Buffer {
  const idBytes = Buffer.from(JSON.stringify(id), 'utf8');
  const out = Buffer.allocUnsafe(frame.length - (end - start) + idBytes.length);
  frame.copy(out, 0, 0, start);
  idBytes.copy(out, start);
  frame.copy(out, start + idBytes.length, end);
  return out;
}
