// Reading the phone's frames without paying for a full parse of large responses.
// A response (up to 256 KiB) only needs its top-level "id" found and swapped back to the
// client's id; requests and notifications from the phone are small and parsed whole.
import type { JsonRpcId } from './jsonrpc.ts';

export type PhoneFrame =
  | { kind: 'response'; id: JsonRpcId | null; idStart: number; idEnd: number }
  | { kind: 'message'; value: unknown }
  | { kind: 'invalid'; reason: string };

// `{"result":…,"jsonrpc":"2.0","id":7}` is what the MCP SDK writes: the id is the last member.
const TAIL_ID = /,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|null)\s*\}\s*$/;
const FIRST_KEY = /^\s*\{\s*"(result|error)"\s*:/;

export function inspectPhoneFrame(text: string): PhoneFrame {
  if (FIRST_KEY.test(text)) {
    const tail = TAIL_ID.exec(text.length > 256 ? text.slice(-256) : text);
    if (tail) {
      const offset = text.length > 256 ? text.length - 256 : 0;
      const valueStart = offset + tail.index + tail[0].indexOf(tail[1], tail[0].indexOf(':') + 1);
      return responseAt(text, valueStart, valueStart + tail[1].length);
    }
  }
  return scanTopLevel(text);
}

function responseAt(text: string, start: number, end: number): PhoneFrame {
  const raw = text.slice(start, end);
  let id: JsonRpcId | null;
  try {
    id = JSON.parse(raw) as JsonRpcId | null;
  } catch {
    return { kind: 'invalid', reason: 'malformed id' };
  }
  if (id !== null && typeof id !== 'string' && typeof id !== 'number') return { kind: 'invalid', reason: 'bad id type' };
  return { kind: 'response', id, idStart: start, idEnd: end };
}

/** Walks the top-level members only; nested values are skipped, strings with indexOf. */
function scanTopLevel(s: string): PhoneFrame {
  let i = skipWs(s, 0);
  if (s.charCodeAt(i) !== 123 /* { */) return { kind: 'invalid', reason: 'not a JSON object' };
  i = skipWs(s, i + 1);
  let idSpan: [number, number] | undefined;
  let isResponse = false;
  if (s.charCodeAt(i) === 125) return { kind: 'invalid', reason: 'empty object' };
  for (;;) {
    if (s.charCodeAt(i) !== 34) return { kind: 'invalid', reason: 'expected a member name' };
    const keyEnd = skipString(s, i);
    if (keyEnd < 0) return { kind: 'invalid', reason: 'unterminated string' };
    const key = s.slice(i + 1, keyEnd - 1);
    i = skipWs(s, keyEnd);
    if (s.charCodeAt(i) !== 58 /* : */) return { kind: 'invalid', reason: 'expected ":"' };
    i = skipWs(s, i + 1);
    const valueStart = i;
    const valueEnd = skipValue(s, i);
    if (valueEnd < 0) return { kind: 'invalid', reason: 'malformed value' };
    if (key === 'method') return parseWhole(s);
    if (key === 'id') idSpan = [valueStart, valueEnd];
    else if (key === 'result' || key === 'error') isResponse = true;
    if (isResponse && idSpan) return responseAt(s, idSpan[0], idSpan[1]);
    i = skipWs(s, valueEnd);
    const c = s.charCodeAt(i);
    if (c === 44 /* , */) {
      i = skipWs(s, i + 1);
      continue;
    }
    if (c === 125 /* } */) break;
    return { kind: 'invalid', reason: 'expected "," or "}"' };
  }
  if (skipWs(s, i + 1) !== s.length) return { kind: 'invalid', reason: 'trailing data' };
  return { kind: 'invalid', reason: isResponse ? 'response without id' : 'no method, result or error' };
}

function parseWhole(s: string): PhoneFrame {
  try {
    return { kind: 'message', value: JSON.parse(s) };
  } catch {
    return { kind: 'invalid', reason: 'malformed JSON' };
  }
}

function skipWs(s: string, i: number): number {
  for (;;) {
    const c = s.charCodeAt(i);
    if (c === 32 || c === 10 || c === 13 || c === 9) i++;
    else return i;
  }
}

/** s[i] is a quote; returns the index after the closing quote, or -1. */
function skipString(s: string, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = s.indexOf('"', from);
    if (q < 0) return -1;
    let backslashes = 0;
    for (let k = q - 1; k > i && s.charCodeAt(k) === 92; k--) backslashes++;
    if (backslashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

function skipValue(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 34) return skipString(s, i);
  if (c === 123 || c === 91) {
    let depth = 0;
    for (let j = i; j < s.length; j++) {
      const d = s.charCodeAt(j);
      if (d === 34) {
        j = skipString(s, j) - 1;
        if (j < 0) return -1;
      } else if (d === 123 || d === 91) depth++;
      else if (d === 125 || d === 93) {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    return -1;
  }
  let j = i;
  while (j < s.length) {
    const d = s.charCodeAt(j);
    if (d === 44 || d === 125 || d === 93 || d === 32 || d === 10 || d === 13 || d === 9) break;
    j++;
  }
  return j > i ? j : -1;
}

/** The frame with the id value at [start, end) replaced by the client's own id. */
export function withId(text: string, start: number, end: number, id: JsonRpcId | null): string {
  return text.slice(0, start) + JSON.stringify(id) + text.slice(end);
}
