// A client's request read as bytes, for the relay's common case: one JSON-RPC request whose
// params carry no `_meta`. The relay reads what it needs — `id`, `method`, the tool name and
// `arguments.timeout_s` (docs/PROTOCOL.md, "What the relay rewrites") — and builds the frame
// to the phone from the body's own bytes: the relay id, the method and params copied
// untouched, the caller context spliced in as params' first member. No parse of the whole
// body into objects and no re-serialisation (docs/decisions/0130-byte-level-requests.md).
//
// Anything else (a batch, `_meta`, duplicate members, an escaped "2.0", invalid UTF-8 or
// JSON) is left to the full parse, which answers it exactly as before: `readClientRequest`
// returning undefined means "take the general path", never "invalid".
import { isUtf8 } from 'node:buffer';
import type { JsonRpcId } from './jsonrpc.ts';
import { waitSeconds } from './timeouts.ts';
import { charCodeAt } from './string-builtins.ts';
import { CLOSE_ARR, CLOSE_OBJ, COLON, COMMA, OPEN_ARR, OPEN_OBJ, QUOTE, BACKSLASH, skipWs } from './json-bytes.ts';

export interface ClientRequestBytes {
  id: JsonRpcId;
  method: string;
  /** params.name, when params has one (it is then a string). */
  toolName?: string;
  /**
   * wait_for_events' wait in seconds: params.arguments.timeout_s, or timeout_ms / 1000, whichever
   * is longer (src/protocol/timeouts.ts, waitSeconds), when one is a number.
   */
  timeoutS?: number;
  body: Buffer;
  methodStart: number;
  methodEnd: number;
  /** params' span in the body; -1 without params. */
  paramsStart: number;
  paramsEnd: number;
  /** params has at least one member. */
  paramsMembers: boolean;
  /**
   * Another node read the request: `body` is its params with the caller context already in
   * them (paramsWithCaller), the method is `method` (src/gateway/node-messages.ts, `b`).
   */
  forwarded?: boolean;
}

const WAIT_TOOL = 'wait_for_events';

/**
 * True when s[i, end) is exactly one JSON value with optional whitespace around it, by the
 * grammar JSON.parse applies (RFC 8259). Strict: what it accepts, JSON.parse accepts.
 */
export function isJsonText(s: Buffer, i = 0, end = s.length): boolean {
  depth = 0;
  const ok = scanJsonText(s, i, end);
  // A deeply nested body grew the stack: let it go rather than keep it for the process's life.
  if (containers.length > 4096) containers = new Uint8Array(64);
  return ok;
}

// The containers open around the current position, innermost last: 1 for an object, 0 for
// an array. Module-level, so a scan allocates nothing (it never re-enters).
let containers = new Uint8Array(64);
let depth = 0;

function pushContainer(obj: boolean): void {
  if (depth === containers.length) {
    const grown = new Uint8Array(depth * 2);
    grown.set(containers);
    containers = grown;
  }
  containers[depth++] = obj ? 1 : 0;
}

function scanJsonText(s: Buffer, i: number, end: number): boolean {
  i = ws(s, i, end);
  for (;;) {
    // A value starts at i.
    const c = s[i];
    if (c === OPEN_OBJ || c === OPEN_ARR) {
      const obj = c === OPEN_OBJ;
      i = ws(s, i + 1, end);
      if (s[i] === (obj ? CLOSE_OBJ : CLOSE_ARR)) {
        i++;
      } else {
        pushContainer(obj);
        if (obj) {
          i = memberName(s, i, end);
          if (i < 0) return false;
        }
        continue;
      }
    } else if (c === QUOTE) {
      i = string(s, i, end);
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      i = number(s, i, end);
    } else if (c === 0x74) {
      i = literal(s, i, end, TRUE);
    } else if (c === 0x66) {
      i = literal(s, i, end, FALSE);
    } else if (c === 0x6e) {
      i = literal(s, i, end, NULL);
    } else return false;
    if (i < 0) return false;
    // After a value: close containers, or go on to the next member / element.
    for (;;) {
      i = ws(s, i, end);
      if (depth === 0) return i === end;
      const obj = containers[depth - 1] === 1;
      const d = s[i];
      if (d === COMMA) {
        i = ws(s, i + 1, end);
        if (obj) {
          i = memberName(s, i, end);
          if (i < 0) return false;
        }
        break;
      }
      if (d !== (obj ? CLOSE_OBJ : CLOSE_ARR)) return false;
      depth--;
      i++;
    }
  }
}

const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');
const NULL = Buffer.from('null');

function ws(s: Buffer, i: number, end: number): number {
  while (i < end) {
    const c = s[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/** A member name and its colon at s[i]: the index of its value, or -1. */
function memberName(s: Buffer, i: number, end: number): number {
  if (s[i] !== QUOTE) return -1;
  i = string(s, i, end);
  if (i < 0) return -1;
  i = ws(s, i, end);
  if (s[i] !== COLON) return -1;
  return ws(s, i + 1, end);
}

function literal(s: Buffer, i: number, end: number, word: Buffer): number {
  if (i + word.length > end) return -1;
  for (let k = 0; k < word.length; k++) if (s[i + k] !== word[k]) return -1;
  return i + word.length;
}

/** A string at s[i] (a quote): the index after its closing quote, or -1. */
function string(s: Buffer, i: number, end: number): number {
  for (i++; i < end; i++) {
    const c = s[i];
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return -1;
    if (c === BACKSLASH) {
      const e = s[++i];
      if (e === 0x75) {
        if (i + 4 >= end) return -1;
        for (let k = 1; k <= 4; k++) if (!isHex(s[i + k])) return -1;
        i += 4;
      } else if (
        e !== QUOTE &&
        e !== BACKSLASH &&
        e !== 0x2f &&
        e !== 0x62 &&
        e !== 0x66 &&
        e !== 0x6e &&
        e !== 0x72 &&
        e !== 0x74
      )
        return -1;
    }
  }
  return -1;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

/** -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? at s[i]: the index after it, or -1. */
function number(s: Buffer, i: number, end: number): number {
  if (s[i] === 0x2d) i++;
  if (s[i] === 0x30) i++;
  else if (isDigit(s[i])) while (i < end && isDigit(s[i])) i++;
  else return -1;
  if (s[i] === 0x2e) {
    i++;
    if (!isDigit(s[i])) return -1;
    while (i < end && isDigit(s[i])) i++;
  }
  if (s[i] === 0x65 || s[i] === 0x45) {
    i++;
    if (s[i] === 0x2b || s[i] === 0x2d) i++;
    if (!isDigit(s[i])) return -1;
    while (i < end && isDigit(s[i])) i++;
  }
  return i;
}

/** The index after the (valid) value at s[i]. */
function valueEnd(s: Buffer, i: number, end: number): number {
  const c = s[i];
  if (c === QUOTE) return string(s, i, end);
  if (c !== OPEN_OBJ && c !== OPEN_ARR) {
    while (i < end) {
      const d = s[i];
      if (d === COMMA || d === CLOSE_OBJ || d === CLOSE_ARR || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09)
        break;
      i++;
    }
    return i;
  }
  let depth = 0;
  for (; i < end; i++) {
    const d = s[i];
    if (d === QUOTE) i = string(s, i, end) - 1;
    else if (d === OPEN_OBJ || d === OPEN_ARR) depth++;
    else if (d === CLOSE_OBJ || d === CLOSE_ARR) {
      if (--depth === 0) return i + 1;
    }
  }
  return -1;
}

/** Whether the string s[start, end) (quotes included, no escapes) is `name`. */
function nameIs(s: Buffer, start: number, end: number, name: string): boolean {
  const n = name.length;
  if (end - start - 2 !== n) return false;
  for (let k = 0; k < n; k++) if (s[start + 1 + k] !== charCodeAt.call(name, k)) return false;
  return true;
}

/**
 * Visits the members of the (valid) object at s[i]; `visit(nameStart, nameEnd, valueStart,
 * valueEnd)` returns false to stop. Returns the number of members, or -1 if stopped.
 */
function members(
  s: Buffer,
  i: number,
  end: number,
  visit: (nameStart: number, nameEnd: number, valueStart: number, valueEnd: number) => boolean,
): number {
  let n = 0;
  i = ws(s, i + 1, end);
  if (s[i] === CLOSE_OBJ) return 0;
  for (;;) {
    const nameStart = i;
    const nameEnd = string(s, i, end);
    i = ws(s, ws(s, nameEnd, end) + 1, end);
    const vEnd = valueEnd(s, i, end);
    n++;
    if (!visit(nameStart, nameEnd, i, vEnd)) return -1;
    i = ws(s, vEnd, end);
    if (s[i] !== COMMA) return n;
    i = ws(s, i + 1, end);
  }
}

/** Any member name with a backslash could spell a name the relay looks for: not for this path. */
function hasEscape(s: Buffer, start: number, end: number): boolean {
  const b = s.indexOf(BACKSLASH, start);
  return b >= 0 && b < end;
}

// Scratch state of one readClientRequest call (the visitors are shared, not made per call).
let cur: Buffer;
// Where the visitors below note what they found: one object each for the module, reset per
// request (readClientRequest never re-enters).
const top = {
  id: -1,
  idEnd: -1,
  method: -1,
  methodEnd: -1,
  params: -1,
  paramsEnd: -1,
  rpc: -1,
  rpcEnd: -1,
  dup: false,
};
const inner = { name: -1, nameEnd: -1, args: -1, argsEnd: -1, meta: false, dup: false };
const timeout = { at: -1, end: -1, dup: false };
const timeoutMs = { at: -1, end: -1, dup: false };

function seen(at: number, dupFlag: { dup: boolean }): boolean {
  if (at >= 0) dupFlag.dup = true;
  return !dupFlag.dup;
}

const visitTop = (ns: number, ne: number, vs: number, ve: number): boolean => {
  if (hasEscape(cur, ns, ne)) return false;
  if (nameIs(cur, ns, ne, 'id')) {
    if (!seen(top.id, top)) return false;
    top.id = vs;
    top.idEnd = ve;
  } else if (nameIs(cur, ns, ne, 'method')) {
    if (!seen(top.method, top)) return false;
    top.method = vs;
    top.methodEnd = ve;
  } else if (nameIs(cur, ns, ne, 'params')) {
    if (!seen(top.params, top)) return false;
    top.params = vs;
    top.paramsEnd = ve;
  } else if (nameIs(cur, ns, ne, 'jsonrpc')) {
    if (!seen(top.rpc, top)) return false;
    top.rpc = vs;
    top.rpcEnd = ve;
  }
  return true;
};

const visitParams = (ns: number, ne: number, vs: number, ve: number): boolean => {
  if (hasEscape(cur, ns, ne)) return false;
  if (nameIs(cur, ns, ne, '_meta')) {
    inner.meta = true;
    return false;
  }
  if (nameIs(cur, ns, ne, 'name')) {
    if (!seen(inner.name, inner)) return false;
    inner.name = vs;
    inner.nameEnd = ve;
  } else if (nameIs(cur, ns, ne, 'arguments')) {
    if (!seen(inner.args, inner)) return false;
    inner.args = vs;
    inner.argsEnd = ve;
  }
  return true;
};

const visitArgs = (ns: number, ne: number, vs: number, ve: number): boolean => {
  if (hasEscape(cur, ns, ne)) return false;
  if (nameIs(cur, ns, ne, 'timeout_s')) {
    if (!seen(timeout.at, timeout)) return false;
    timeout.at = vs;
    timeout.end = ve;
  } else if (nameIs(cur, ns, ne, 'timeout_ms')) {
    if (!seen(timeoutMs.at, timeoutMs)) return false;
    timeoutMs.at = vs;
    timeoutMs.end = ve;
  }
  return true;
};

const RPC_20 = Buffer.from('"2.0"');

// The methods a client sends most, as their JSON strings: read as the same string each time.
const KNOWN_METHODS = [
  'tools/call',
  'tools/list',
  'resources/read',
  'resources/list',
  'prompts/get',
  'prompts/list',
  'ping',
  'notifications/cancelled',
].map((m) => ({ method: m, json: Buffer.from(JSON.stringify(m)) }));

function knownMethod(s: Buffer, start: number, end: number): string | undefined {
  const len = end - start;
  for (const k of KNOWN_METHODS)
    if (k.json.length === len && s.compare(k.json, 0, len, start, end) === 0) return k.method;
  return undefined;
}

/** The number at a member's value span, or undefined when it is absent or not a number. */
function numberAt(s: Buffer, span: { at: number; end: number }): number | undefined {
  const c = span.at >= 0 ? s[span.at] : 0;
  return c === 0x2d || isDigit(c) ? (parseSpan(s, span.at, span.end) as number) : undefined;
}

function parseSpan(s: Buffer, start: number, end: number): unknown {
  return JSON.parse(s.toString('utf8', start, end));
}

/** The request, or undefined: the general path (full parse) decides what it is. */
export function readClientRequest(body: Buffer): ClientRequestBytes | undefined {
  const start = skipWs(body, 0);
  if (body[start] !== OPEN_OBJ || !isJsonText(body, start) || !isUtf8(body)) return undefined;
  cur = body;
  top.id = top.idEnd = top.method = top.methodEnd = top.params = top.paramsEnd = top.rpc = top.rpcEnd = -1;
  top.dup = false;
  if (members(body, start, body.length, visitTop) < 0) return undefined;
  const t = top;
  if (t.rpc < 0 || t.rpcEnd - t.rpc !== 5 || body.compare(RPC_20, 0, 5, t.rpc, t.rpcEnd) !== 0) return undefined;
  if (t.method < 0 || body[t.method] !== QUOTE || t.id < 0) return undefined;
  const idChar = body[t.id];
  if (idChar !== QUOTE && idChar !== 0x2d && !isDigit(idChar)) return undefined;
  const id = parseSpan(body, t.id, t.idEnd) as JsonRpcId;
  if (typeof id === 'number' && !Number.isSafeInteger(id)) return undefined; // classify() refuses it
  const method = knownMethod(body, t.method, t.methodEnd) ?? (parseSpan(body, t.method, t.methodEnd) as string);
  const req: ClientRequestBytes = {
    id,
    method,
    body,
    methodStart: t.method,
    methodEnd: t.methodEnd,
    paramsStart: -1,
    paramsEnd: -1,
    paramsMembers: false,
  };
  if (t.params < 0) return req;
  if (body[t.params] !== OPEN_OBJ) return undefined;
  inner.name = inner.nameEnd = inner.args = inner.argsEnd = -1;
  inner.meta = inner.dup = false;
  const n = members(body, t.params, t.paramsEnd, visitParams);
  if (n < 0) return undefined;
  req.paramsStart = t.params;
  req.paramsEnd = t.paramsEnd;
  req.paramsMembers = n > 0;
  const p = inner;
  if (p.name >= 0) {
    if (body[p.name] !== QUOTE) return undefined;
    req.toolName = parseSpan(body, p.name, p.nameEnd) as string;
  }
  if (req.toolName === WAIT_TOOL && p.args >= 0 && body[p.args] === OPEN_OBJ) {
    timeout.at = timeout.end = timeoutMs.at = timeoutMs.end = -1;
    timeout.dup = timeoutMs.dup = false;
    if (members(body, p.args, p.argsEnd, visitArgs) < 0) return undefined;
    const wait = waitSeconds(numberAt(body, timeout), numberAt(body, timeoutMs));
    if (wait !== undefined) req.timeoutS = wait;
  }
  return req;
}

const FRAME_HEAD = Buffer.from('{"jsonrpc":"2.0","id":');
const METHOD = Buffer.from(',"method":');
const PARAMS_META = Buffer.from(',"params":{"_meta":{"phonebridge/caller":');
const CLOSE_META = Buffer.from('}');

/**
 * The frame to the phone: `{"jsonrpc":"2.0","id":<relayId>,"method":…,"params":…}` with the
 * caller context (`callerJson`, src/protocol/caller.ts) as `params._meta["phonebridge/caller"]`
 * and every other byte of params as the client sent it. One allocation, one copy.
 */
export function requestFrame(req: ClientRequestBytes, relayId: number, callerJson: Buffer): Buffer {
  const rid = String(relayId);
  const b = req.body;
  const methodLen = req.methodEnd - req.methodStart;
  // After `"_meta":{…caller…}`: `}` then either the rest of params (`,` + members + `}`) or `}`.
  const restLen = req.paramsMembers ? 1 + (req.paramsEnd - req.paramsStart - 1) : 1;
  const len =
    FRAME_HEAD.length +
    rid.length +
    METHOD.length +
    methodLen +
    PARAMS_META.length +
    callerJson.length +
    1 +
    restLen +
    1;
  const out = Buffer.allocUnsafe(len);
  let o = FRAME_HEAD.copy(out, 0);
  o += out.write(rid, o, 'latin1');
  o += METHOD.copy(out, o);
  o += b.copy(out, o, req.methodStart, req.methodEnd);
  o += PARAMS_META.copy(out, o);
  o += callerJson.copy(out, o);
  o += CLOSE_META.copy(out, o);
  if (req.paramsMembers) {
    out[o++] = COMMA;
    o += b.copy(out, o, req.paramsStart + 1, req.paramsEnd); // the members and params' own `}`
  } else out[o++] = CLOSE_OBJ;
  out[o] = CLOSE_OBJ;
  return out;
}

const PARAMS_HEAD = Buffer.from('{"_meta":{"phonebridge/caller":');

/**
 * params with the caller context as their first member: the JSON value withCallerContext
 * (src/protocol/caller.ts) gives for a request without `_meta`, built from the body's bytes.
 * What a request read here carries to the phone's node, which parses it only if it is older
 * than docs/decisions/0134-cross-node-bytes.md.
 */
export function paramsWithCaller(req: ClientRequestBytes, callerJson: Buffer): Buffer {
  const b = req.body;
  const restLen = req.paramsMembers ? req.paramsEnd - req.paramsStart : 1; // `,` + members + `}`, or `}`
  const out = Buffer.allocUnsafe(PARAMS_HEAD.length + callerJson.length + 1 + restLen);
  let o = PARAMS_HEAD.copy(out, 0);
  o += callerJson.copy(out, o);
  out[o++] = CLOSE_OBJ;
  if (req.paramsMembers) {
    out[o++] = COMMA;
    b.copy(out, o, req.paramsStart + 1, req.paramsEnd);
  } else out[o] = CLOSE_OBJ;
  return out;
}

const PARAMS = Buffer.from(',"params":');

/** The frame to the phone for a forwarded request: params (paramsWithCaller's) copied whole. */
export function forwardedFrame(relayId: number, method: string, params: Buffer): Buffer {
  const rid = String(relayId);
  const m = JSON.stringify(method);
  const mLen = Buffer.byteLength(m);
  const out = Buffer.allocUnsafe(
    FRAME_HEAD.length + rid.length + METHOD.length + mLen + PARAMS.length + params.length + 1,
  );
  let o = FRAME_HEAD.copy(out, 0);
  o += out.write(rid, o, 'latin1');
  o += METHOD.copy(out, o);
  o += out.write(m, o, 'utf8');
  o += PARAMS.copy(out, o);
  o += params.copy(out, o);
  out[o] = CLOSE_OBJ;
  return out;
}
