// Reading the phone's frames without paying for a full parse of large responses.
// A response (up to 256 KiB) only needs its top-level "id" found and swapped back to the
// client's id; requests and notifications from the phone are small and parsed whole.
// Frames stay UTF-8 bytes end to end: JSON's structural characters are ASCII and UTF-8
// never reuses ASCII bytes inside multi-byte sequences, so a byte scan is exact.
import type { JsonRpcId } from './jsonrpc.ts';
import { scanObject, skipWs } from './json-bytes.ts';

export type PhoneFrame =
  | { kind: 'response'; id: JsonRpcId | null; idStart: number; idEnd: number }
  | { kind: 'message'; value: unknown }
  | { kind: 'invalid'; reason: string };

// `{"result":…,"jsonrpc":"2.0","id":7}` is what the MCP SDK writes: the id is the last member.
const TAIL_ID = /,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|null)\s*\}\s*$/;
const FIRST_KEY = /^\s*\{\s*"(result|error)"\s*:/;
const PEEK = 256;

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

/** The frame with the id value at [start, end) replaced by the client's own id: one copy. */
export function withId(frame: Buffer, start: number, end: number, id: JsonRpcId | null): Buffer {
  const idBytes = Buffer.from(JSON.stringify(id), 'utf8');
  const out = Buffer.allocUnsafe(frame.length - (end - start) + idBytes.length);
  frame.copy(out, 0, 0, start);
  idBytes.copy(out, start);
  frame.copy(out, start + idBytes.length, end);
  return out;
}
