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
import { Buffer, isUtf8 } from 'node:buffer';
import type { JsonRpcId } from './jsonrpc.ts';
import { waitSeconds } from './timeouts.ts';
import { bytesAre, keptBytes, bytesOf, decimalDigits, integerAt, put, putDecimal, skipWs } from './json-bytes.ts';
import { isExactNumber } from './exact-json.ts';

// JSON's structural bytes as this module's own constants, not imported ones: in the per-byte
// loops below an imported binding costs a load through its module cell each time.
const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COMMA = 0x2c,
  COLON = 0x3a,
  OPEN_OBJ = 0x7b,
  CLOSE_OBJ = 0x7d,
  OPEN_ARR = 0x5b,
  CLOSE_ARR = 0x5d;

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
  return scanText(s, i, end, OTHER);
}

// The scan below validates a text and, reading a request, records in the same pass where the
// members the relay reads are (one pass over the body: no second walk of params to find them).
// Its state is module-level, so a scan allocates nothing (it never re-enters).

// What a container's members are to the relay: nothing (OTHER), or the request's own members
// (TOP), params' (IN_PARAMS), or wait_for_events' arguments (IN_ARGS).
const OTHER = 0,
  TOP = 1,
  IN_PARAMS = 2,
  IN_ARGS = 3;
// The members recorded, as slots of `spanStart` / `spanEnd` (value spans; -1: absent).
const ID = 0,
  METHOD_AT = 1,
  PARAMS_AT = 2,
  RPC = 3,
  NAME = 4,
  ARGUMENTS = 5,
  TIMEOUT_S = 6,
  TIMEOUT_MS = 7,
  SLOTS = 8;
const spanStart = new Int32Array(SLOTS);
const spanEnd = new Int32Array(SLOTS);
// The containers open around the current position, innermost last, one number each: bit 0
// whether it is an object, bits 1–2 its role, the rest the slot its own value fills plus one
// (0: none). One typed array, held in a local while a scan runs (a module binding costs a load
// through its context on each use).
let stack: Int32Array = new Int32Array(64);
/** The slot the next value fills (set by its member name), or -1. */
let pending = -1;
/** Set by `string` when the string it scanned holds an escape. */
let sawEscape = false;
/** Members of params seen. */
let paramsMembers = 0;
/** arguments has a duplicate or escaped timeout name: wait_for_events takes the general path. */
let argsIrregular = false;

function scanText(s: Buffer, i: number, end: number, topRole: number): boolean {
  pending = -1;
  const ok = scanJsonText(s, i, end, topRole);
  // A deeply nested body grew the stack: let it go rather than keep it for the process's life.
  if (stack.length > 4096) stack = new Int32Array(64);
  return ok;
}

function grown(st: Int32Array): Int32Array {
  const bigger = new Int32Array(st.length * 2);
  bigger.set(st);
  return (stack = bigger);
}

function scanJsonText(s: Buffer, i: number, end: number, topRole: number): boolean {
  let st = stack;
  let depth = 0;
  i = ws(s, i, end);
  for (;;) {
    // A value starts at i; `slot` is where it is recorded.
    const slot = pending;
    if (slot >= 0) {
      pending = -1;
      spanStart[slot] = i;
    }
    const c = s[i];
    if (c === OPEN_OBJ || c === OPEN_ARR) {
      const obj = c === OPEN_OBJ;
      i = ws(s, i + 1, end);
      if (s[i] === (obj ? CLOSE_OBJ : CLOSE_ARR)) {
        i++;
      } else {
        const role = !obj
          ? OTHER
          : depth === 0
            ? topRole
            : slot === PARAMS_AT
              ? IN_PARAMS
              : slot === ARGUMENTS
                ? IN_ARGS
                : OTHER;
        if (depth === st.length) st = grown(st);
        st[depth++] = ((slot + 1) << 3) | (role << 1) | (obj ? 1 : 0);
        if (obj) {
          i = memberName(s, i, end, role);
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
    if (slot >= 0) spanEnd[slot] = i;
    // After a value: close containers, or go on to the next member / element.
    for (;;) {
      i = ws(s, i, end);
      if (depth === 0) return i === end;
      const top = st[depth - 1];
      const obj = (top & 1) === 1;
      const d = s[i];
      if (d === COMMA) {
        i = ws(s, i + 1, end);
        if (obj) {
          i = memberName(s, i, end, (top >> 1) & 3);
          if (i < 0) return false;
        }
        break;
      }
      if (d !== (obj ? CLOSE_OBJ : CLOSE_ARR)) return false;
      depth--;
      i++;
      const closed = (top >> 3) - 1;
      if (closed >= 0) spanEnd[closed] = i;
    }
  }
}

const TRUE = bytesOf('true');
const FALSE = bytesOf('false');
const NULL = bytesOf('null');

function ws(s: Buffer, i: number, end: number): number {
  while (i < end) {
    const c = s[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/**
 * A member name and its colon at s[i], in a container of `role`: the index of its value, or -1
 * (invalid, or not for this path).
 */
function memberName(s: Buffer, i: number, end: number, role: number): number {
  if (s[i] !== QUOTE) return -1;
  sawEscape = false;
  const nameEnd = string(s, i, end);
  if (nameEnd < 0) return -1;
  if (role !== OTHER && !noteMember(s, i, nameEnd, role)) return -1;
  i = ws(s, nameEnd, end);
  if (s[i] !== COLON) return -1;
  return ws(s, i + 1, end);
}

const NAME_ID = bytesOf('id');
const NAME_METHOD = bytesOf('method');
const NAME_PARAMS = bytesOf('params');
const NAME_JSONRPC = bytesOf('jsonrpc');
const NAME_META = bytesOf('_meta');
const NAME_NAME = bytesOf('name');
const NAME_ARGUMENTS = bytesOf('arguments');
const NAME_TIMEOUT_S = bytesOf('timeout_s');
const NAME_TIMEOUT_MS = bytesOf('timeout_ms');

/**
 * A member name s[ns, ne) (quotes included) of a container the relay reads: sets `pending` to
 * the slot its value fills. False sends the request to the general path: an escaped name
 * (it could spell one the relay looks for), a duplicate, or params' `_meta`.
 */
function noteMember(s: Buffer, ns: number, ne: number, role: number): boolean {
  const len = ne - ns - 2;
  const at = ns + 1;
  let slot = -1;
  if (role === IN_ARGS) {
    // Read only for wait_for_events, whose name may come after them: noted, decided later.
    if (sawEscape) argsIrregular = true;
    else if (len === 9 && bytesAre(s, at, NAME_TIMEOUT_S)) slot = TIMEOUT_S;
    else if (len === 10 && bytesAre(s, at, NAME_TIMEOUT_MS)) slot = TIMEOUT_MS;
    if (slot >= 0 && spanStart[slot] >= 0) {
      argsIrregular = true;
      slot = -1;
    }
    pending = slot;
    return true;
  }
  if (sawEscape) return false;
  if (role === TOP) {
    if (len === 2 && bytesAre(s, at, NAME_ID)) slot = ID;
    else if (len === 6 && bytesAre(s, at, NAME_METHOD)) slot = METHOD_AT;
    else if (len === 6 && bytesAre(s, at, NAME_PARAMS)) slot = PARAMS_AT;
    else if (len === 7 && bytesAre(s, at, NAME_JSONRPC)) slot = RPC;
  } else {
    paramsMembers++;
    if (len === 5 && bytesAre(s, at, NAME_META)) return false;
    if (len === 4 && bytesAre(s, at, NAME_NAME)) slot = NAME;
    else if (len === 9 && bytesAre(s, at, NAME_ARGUMENTS)) slot = ARGUMENTS;
  }
  if (slot >= 0 && spanStart[slot] >= 0) return false;
  pending = slot;
  return true;
}

function literal(s: Buffer, i: number, end: number, word: readonly number[]): number {
  return i + word.length <= end && bytesAre(s, i, word) ? i + word.length : -1;
}

/** A string at s[i] (a quote): the index after its closing quote, or -1. */
function string(s: Buffer, i: number, end: number): number {
  for (i++; i < end; i++) {
    const c = s[i];
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return -1;
    if (c === BACKSLASH) {
      sawEscape = true;
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

const RPC_20 = bytesOf('"2.0"');

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
].map((m) => ({ method: m, json: bytesOf(JSON.stringify(m)) }));

function knownMethod(s: Buffer, start: number, end: number): string | undefined {
  const len = end - start;
  for (const k of KNOWN_METHODS) if (k.json.length === len && bytesAre(s, start, k.json)) return k.method;
  return undefined;
}

// Tool names read lately, by their JSON string's bytes: clients call the same few tools, so
// a name seen before is a byte compare and the same string as last time (no UTF-8 decode, and
// its hash for the tool catalog's Map already computed). Direct-mapped, 16 slots; a name over
// 64 bytes is read each time. A miss costs one small copy.
const NAME_SLOTS = 16;
const MEMO_MAX = 66; // 64 bytes of name and its quotes
const NO_NAME: readonly number[] = [];
const namesJson: Array<readonly number[]> = Array.from({ length: NAME_SLOTS }, () => NO_NAME);
const names: string[] = Array.from({ length: NAME_SLOTS }, () => '');

/** The (valid) string value s[start, end), quotes included, through the memo above. */
function toolNameAt(s: Buffer, start: number, end: number): string {
  const len = end - start;
  if (len > MEMO_MAX) return stringAt(s, start, end);
  const slot = (len * 7 + s[start + 1] + s[end - 2]) & (NAME_SLOTS - 1);
  const json = namesJson[slot];
  if (json.length === len && bytesAre(s, start, json)) return names[slot];
  const name = stringAt(s, start, end);
  namesJson[slot] = Array.from(s.subarray(start, end));
  names[slot] = name;
  return name;
}

/** The number at a slot's span, or undefined when it is absent or not a number. */
function numberAt(s: Buffer, slot: number): number | undefined {
  const at = spanStart[slot];
  const c = at >= 0 ? s[at] : 0;
  return c === 0x2d || isDigit(c) ? (parseSpan(s, at, spanEnd[slot]) as number) : undefined;
}

function parseSpan(s: Buffer, start: number, end: number): unknown {
  return JSON.parse(s.toString('utf8', start, end));
}

/** The (valid) string value s[start, end), quotes included. */
function stringAt(s: Buffer, start: number, end: number): string {
  for (let k = start + 1; k < end - 1; k++) if (s[k] === BACKSLASH) return parseSpan(s, start, end) as string;
  return s.toString('utf8', start + 1, end - 1);
}

/**
 * The (valid) id s[start, end): a string, or a number; undefined for a number that is not a
 * safe integer, or that a double does not hold as written (1.0000000000000001 is read as 1:
 * classify() refuses it). A short integer is read here (integerAt), any other number by
 * JSON.parse.
 */
function idAt(s: Buffer, start: number, end: number): JsonRpcId | undefined {
  if (s[start] === QUOTE) return stringAt(s, start, end);
  const n = integerAt(s, start, end);
  if (!Number.isNaN(n)) return n;
  const text = s.toString('latin1', start, end);
  const id = Number(text);
  return Number.isSafeInteger(id) && isExactNumber(text) ? id : undefined;
}

/**
 * A client's last request read in full, kept to read its next one as two compares: an agent
 * asks again and again with the same bytes but for the id (a screenshot, the screen's text, a
 * wait for events, a list), and a body that is the last one's bytes around another integer id
 * is the same request, as valid as it was (docs/decisions/0259-a-request-read-as-the-last-one-again.md).
 * One per client (its caller holds it); any other body is read in full, and kept in its place
 * after two such in a row (`replaces`).
 */
export class RequestMemo {
  /**
   * The last request's bytes before its id and after it, as little-endian words of four bytes
   * (the last of each part zero above its bytes), the part after from `tailAt` on; idStart 0:
   * none kept. Words, not a copy of the bytes: a compare loads one word of them for four bytes
   * of the body, and an Int32Array holds each as an integer.
   */
  words = new Int32Array(0);
  tailAt = 0;
  length = 0;
  idStart = 0;
  idEnd = 0;
  /** Requests read in full since the kept one was last read again or kept. */
  misses = 0;
  method = '';
  toolName: string | undefined = undefined;
  timeoutS: number | undefined = undefined;
  paramsMembers = false;
  hasParams = false;
  // Its spans: a position before the id from the body's start, one after it from the body's
  // end (negative).
  methodStart = 0;
  methodEnd = 0;
  paramsStart = 0;
  paramsEnd = 0;
}

/** Longer bodies are not kept: a compare that fails late costs more than it saves. */
const MEMO_BODY_MAX = 512;

/** `req` as the client's request memo, when its id is an integer and its body short enough. */
function remember(memo: RequestMemo, req: ClientRequestBytes, idStart: number, idEnd: number): void {
  const b = req.body;
  if (typeof req.id !== 'number' || b.length > MEMO_BODY_MAX || Number.isNaN(integerAt(b, idStart, idEnd))) return;
  if (memo.words.length === 0) memo.words = new Int32Array(MEMO_BODY_MAX / 4 + 2);
  memo.tailAt = keepWords(memo.words, 0, b, 0, idStart);
  keepWords(memo.words, memo.tailAt, b, idEnd, b.length);
  memo.misses = 0;
  memo.length = b.length;
  memo.idStart = idStart;
  memo.idEnd = idEnd;
  memo.method = req.method;
  memo.toolName = req.toolName;
  memo.timeoutS = req.timeoutS;
  memo.paramsMembers = req.paramsMembers;
  memo.hasParams = req.paramsStart >= 0;
  memo.methodStart = relative(req.methodStart, idStart, b.length);
  memo.methodEnd = relative(req.methodEnd, idStart, b.length);
  memo.paramsStart = relative(req.paramsStart, idStart, b.length);
  memo.paramsEnd = relative(req.paramsEnd, idStart, b.length);
}

const relative = (at: number, idStart: number, length: number) => (at < idStart ? at : at - length);
const absolute = (at: number, length: number) => (at < 0 ? at + length : at);

/** s[from, to) into words from index `at` on; returns the index after the last. */
function keepWords(words: Int32Array, at: number, s: Buffer, from: number, to: number): number {
  const whole = (to - from) >> 2;
  for (let w = 0; w < whole; w++) words[at + w] = wordAt(s, from + 4 * w);
  const rest = (to - from) & 3;
  if (rest === 0) return at + whole;
  words[at + whole] = restAt(s, from + 4 * whole, rest);
  return at + whole + 1;
}

/**
 * Whether s[from, to) is the words kept from `at` on, compared from the end: one client's
 * requests differ in their arguments, which end the part after the id (the Python SDK's member
 * order) or the part before it (the TypeScript SDK's, id last).
 */
function sameWords(words: Int32Array, at: number, s: Buffer, from: number, to: number): boolean {
  const whole = (to - from) >> 2;
  const rest = (to - from) & 3;
  if (rest !== 0 && words[at + whole] !== restAt(s, from + 4 * whole, rest)) return false;
  for (let w = whole - 1; w >= 0; w--) if (words[at + w] !== wordAt(s, from + 4 * w)) return false;
  return true;
}

// The words of json-bytes.ts's Run (runAt reads them the same way), written again here: imported,
// each call in these loops is a load through the module's cell (a repeat's read 2.39 → 2.64–2.68
// thousand instructions in a loop under callgrind), as imported constants were
// (docs/decisions/0241-the-request-path-without-runtime-calls.md, amended).
const wordAt = (s: Buffer, i: number) => s[i] | (s[i + 1] << 8) | (s[i + 2] << 16) | (s[i + 3] << 24);

function restAt(s: Buffer, i: number, n: number): number {
  let w = s[i];
  if (n > 1) w |= s[i + 1] << 8;
  if (n > 2) w |= s[i + 2] << 16;
  return w;
}

/** The memo's request again with another integer id between its bytes, or undefined. */
function again(memo: RequestMemo, body: Buffer): ClientRequestBytes | undefined {
  const idStart = memo.idStart;
  const n = body.length;
  const idEnd = n - (memo.length - memo.idEnd);
  if (idStart === 0 || idEnd <= idStart || idEnd - idStart > 16) return undefined;
  const words = memo.words;
  if (!sameWords(words, memo.tailAt, body, idEnd, n) || !sameWords(words, 0, body, 0, idStart)) return undefined;
  const id = integerAt(body, idStart, idEnd);
  if (Number.isNaN(id)) return undefined;
  const params = memo.hasParams;
  return {
    id,
    method: memo.method,
    toolName: memo.toolName,
    timeoutS: memo.timeoutS,
    body,
    methodStart: absolute(memo.methodStart, n),
    methodEnd: absolute(memo.methodEnd, n),
    paramsStart: params ? absolute(memo.paramsStart, n) : -1,
    paramsEnd: params ? absolute(memo.paramsEnd, n) : -1,
    paramsMembers: memo.paramsMembers,
    forwarded: false,
  };
}

/**
 * The request, or undefined: the general path (full parse) decides what it is. With the
 * client's memo, a body that repeats its last request but for the id is read from the memo.
 */
export function readClientRequest(body: Buffer, memo?: RequestMemo): ClientRequestBytes | undefined {
  if (memo === undefined) return readInFull(body);
  const repeat = again(memo, body);
  if (repeat !== undefined) {
    memo.misses = 0;
    return repeat;
  }
  const req = readInFull(body);
  // The id's span is still the scan's, which ran last.
  if (req !== undefined && replaces(memo)) remember(memo, req, spanStart[ID], spanEnd[ID]);
  return req;
}

/**
 * Whether a request read in full takes the memo's place: when none is kept, or when the kept
 * one was not asked again for two requests in a row. An agent's loop (the screen, a tap, the
 * screen, a swipe, …) keeps its repeat; a client that never repeats copies every other body.
 */
function replaces(memo: RequestMemo): boolean {
  return memo.idStart === 0 || ++memo.misses >= 2;
}

function readInFull(body: Buffer): ClientRequestBytes | undefined {
  const start = skipWs(body, 0);
  if (body[start] !== OPEN_OBJ) return undefined;
  for (let k = 0; k < SLOTS; k++) spanStart[k] = -1;
  paramsMembers = 0;
  argsIrregular = false;
  if (!scanText(body, start, body.length, TOP) || !isUtf8(body)) return undefined;
  const rpc = spanStart[RPC];
  if (rpc < 0 || spanEnd[RPC] - rpc !== 5 || !bytesAre(body, rpc, RPC_20)) return undefined;
  const m = spanStart[METHOD_AT];
  const idStart = spanStart[ID];
  if (m < 0 || body[m] !== QUOTE || idStart < 0) return undefined;
  const idChar = body[idStart];
  if (idChar !== QUOTE && idChar !== 0x2d && !isDigit(idChar)) return undefined;
  const id = idAt(body, idStart, spanEnd[ID]);
  if (id === undefined) return undefined;
  const mEnd = spanEnd[METHOD_AT];
  const method = knownMethod(body, m, mEnd) ?? stringAt(body, m, mEnd);
  // Every field, in forwardedBytes's order (src/gateway/node-messages.ts): one shape for every
  // request read, so the code that reads them (requestFrame, admission) loads each field directly.
  const req: ClientRequestBytes = {
    id,
    method,
    toolName: undefined,
    timeoutS: undefined,
    body,
    methodStart: m,
    methodEnd: mEnd,
    paramsStart: -1,
    paramsEnd: -1,
    paramsMembers: false,
    forwarded: false,
  };
  const p = spanStart[PARAMS_AT];
  if (p < 0) return req;
  if (body[p] !== OPEN_OBJ) return undefined;
  req.paramsStart = p;
  req.paramsEnd = spanEnd[PARAMS_AT];
  req.paramsMembers = paramsMembers > 0;
  const name = spanStart[NAME];
  if (name >= 0) {
    if (body[name] !== QUOTE) return undefined;
    req.toolName = toolNameAt(body, name, spanEnd[NAME]);
  }
  const args = spanStart[ARGUMENTS];
  if (req.toolName === WAIT_TOOL && args >= 0 && body[args] === OPEN_OBJ) {
    if (argsIrregular) return undefined;
    const wait = waitSeconds(numberAt(body, TIMEOUT_S), numberAt(body, TIMEOUT_MS));
    if (wait !== undefined) req.timeoutS = wait;
  }
  return req;
}

const FRAME_HEAD = Buffer.from('{"jsonrpc":"2.0","id":');
const METHOD = Buffer.from(',"method":');
const PARAMS_META = Buffer.from(',"params":{"_meta":{"phonebridge/caller":');

/**
 * The frame to the phone: `{"jsonrpc":"2.0","id":<relayId>,"method":…,"params":…}` with the
 * caller context (`callerJson`, src/protocol/caller.ts) as `params._meta["phonebridge/caller"]`
 * and every other byte of params as the client sent it. One allocation, one copy.
 */
export function requestFrame(req: ClientRequestBytes, relayId: number, callerJson: Buffer): Buffer {
  const digits = decimalDigits(relayId);
  const b = req.body;
  const methodLen = req.methodEnd - req.methodStart;
  // After `"_meta":{…caller…}`: `}` then either the rest of params (`,` + members + `}`) or `}`.
  const restLen = req.paramsMembers ? 1 + (req.paramsEnd - req.paramsStart - 1) : 1;
  const len =
    FRAME_HEAD.length + digits + METHOD.length + methodLen + PARAMS_META.length + callerJson.length + 1 + restLen + 1;
  const out = Buffer.allocUnsafe(len);
  let o = put(FRAME_HEAD, 0, FRAME_HEAD.length, out, 0);
  o += putDecimal(out, o, relayId, digits);
  o += put(METHOD, 0, METHOD.length, out, o);
  o += put(b, req.methodStart, req.methodEnd, out, o);
  o += put(PARAMS_META, 0, PARAMS_META.length, out, o);
  o += put(callerJson, 0, callerJson.length, out, o);
  out[o++] = CLOSE_OBJ;
  if (req.paramsMembers) {
    out[o++] = COMMA;
    o += put(b, req.paramsStart + 1, req.paramsEnd, out, o); // the members and params' own `}`
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
  let o = put(PARAMS_HEAD, 0, PARAMS_HEAD.length, out, 0);
  o += put(callerJson, 0, callerJson.length, out, o);
  out[o++] = CLOSE_OBJ;
  if (req.paramsMembers) {
    out[o++] = COMMA;
    put(b, req.paramsStart + 1, req.paramsEnd, out, o);
  } else out[o] = CLOSE_OBJ;
  return out;
}

/**
 * `,"method":<the method as JSON>,"params":`, kept for the last method: a node forwards few, and
 * stringifying, measuring and encoding the method cost three calls into the runtime per request
 * (about 2 thousand instructions) where a copy of kept bytes costs a few hundred — and one copy
 * of the three pieces together less than three (each under put's 16 bytes, a byte loop).
 */
const methodAndParams = keptBytes((method) => `,"method":${JSON.stringify(method)},"params":`);

/** The frame to the phone for a forwarded request: params (paramsWithCaller's) copied whole. */
export function forwardedFrame(relayId: number, method: string, params: Buffer): Buffer {
  const digits = decimalDigits(relayId);
  const m = methodAndParams(method);
  const out = Buffer.allocUnsafe(FRAME_HEAD.length + digits + m.length + params.length + 1);
  let o = put(FRAME_HEAD, 0, FRAME_HEAD.length, out, 0);
  o += putDecimal(out, o, relayId, digits);
  o += put(m, 0, m.length, out, o);
  o += put(params, 0, params.length, out, o);
  out[o] = CLOSE_OBJ;
  return out;
}
