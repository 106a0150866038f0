// The header of a request sent to the node holding the phone (router.ts `send`, `t: "req"`),
// written and read by hand: the bytes are exactly those nodeHeaderLine (JSON.stringify) writes
// for the header the router builds, and reading them gives the object JSON.parse gives. It is
// the one header of every cross-node call whose fields vary (the answers' are ridHeaderLine's),
// and JSON.stringify and JSON.parse of it cost about a microsecond each (docs/decisions/0241-
// the-request-path-without-runtime-calls.md). Anything the reader does not expect — an escape,
// a fraction, another order, a field of a newer release — sends the header to JSON.parse: the
// format is nodeMessage's, unchanged (docs/decisions/0200-bus-and-record-format-versions.md).
import { Buffer } from 'node:buffer';
import { integerAt, runAt, runOf, type Run } from '../protocol/json-bytes.ts';
import { charCodeAt } from '../protocol/string-builtins.ts';

/**
 * The fields of a request's header (src/gateway/node-messages.ts `Header`), in the order the
 * router builds them (JSON.stringify's order): the members that change from one request to the
 * next first, then the request's context (origin, device, call), which a node's requests
 * repeat, in one run (docs/decisions/0257-the-request-header-s-context-in-one-run.md).
 */
export interface ReqHeader {
  t: 'req';
  /** The origin's id for the request. */
  rid: number;
  /** The client's id. */
  id: string | number;
  timeoutMs: number;
  /** The origin node. */
  from: string;
  deviceId: string;
  /** The owner's epoch the origin found. */
  epoch: number;
  method: string;
  scopes: readonly string[];
  tokenId?: string;
  /** The origin's PRODUCER span (W3C traceparent), only while it traces (docs/decisions/0111-trace-context-on-the-bus-and-in-meta.md). */
  tp?: string;
  /** With `tp`: the W3C tracestate of that span's context (the client's), when it has one. */
  tst?: string;
  /**
   * 1: the origin read the request from its bytes, and the payload (params with the caller
   * context, as always) is forwarded to the phone without a parse
   * (docs/decisions/0134-cross-node-bytes.md). A node that does not know `b` parses it.
   */
  b?: 1;
  /** With `b`: params.name and wait_for_events' wait in seconds (timeout_s, or timeout_ms / 1000), as the origin read them. */
  tn?: string;
  ts?: number;
}

/** `s` as a JSON string when it needs no escape (no quote, backslash, control or surrogate); else undefined. */
function plainJson(s: string): string | undefined {
  for (let i = 0; i < s.length; i++) {
    const c = charCodeAt.call(s, i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return undefined;
  }
  return `"${s}"`;
}

const json = (s: string): string => plainJson(s) ?? JSON.stringify(s);

// The members whose strings a node's requests repeat (their origin, device, method, credential
// and tool), for the reader's memos; OTHER has none.
const FROM = 0,
  DEVICE = 1,
  METHOD_NAME = 2,
  TOKEN = 3,
  TOOL = 4,
  OTHER = 5;

const num = (n: number): string => (Number.isFinite(n) ? String(n) : 'null');

// The scopes of the last header written (a copy: compared by content, so an array changed in
// place is never written stale) and their JSON: one credential's calls in a row carry the same.
let lastScopes: string[] = [];
let lastScopesJson = '[]';

function scopesJson(scopes: readonly string[]): string {
  let same = scopes.length === lastScopes.length;
  for (let i = 0; same && i < scopes.length; i++) same = scopes[i] === lastScopes[i];
  if (!same) {
    let out = '[';
    for (let i = 0; i < scopes.length; i++) out += (i > 0 ? ',' : '') + json(scopes[i]);
    lastScopes = scopes.slice();
    lastScopesJson = out + ']';
  }
  return lastScopesJson;
}

// The header is written as runs that a node's requests repeat (its start, the context, the
// tail), each kept with what it was made of, and the members that change (rid, id, timeout,
// trace context) between them. A concatenation is a tree of its pieces that the runtime walks,
// piece by piece, each time the string is encoded: about 3 thousand instructions for a header
// of some 30 pieces, against several hundred for 7 flat ones. Strings compare as pointers when
// they are the same object, which repeated members mostly are.

/**
 * `s` as one flat string: a run is written into every header made while it lasts, and a
 * concatenation would be walked piece by piece each time. Lossless: a run is JSON text, which
 * JSON.stringify keeps well-formed (a lone surrogate is escaped).
 */
const flat = (s: string): string => Buffer.from(s, 'utf8').toString('utf8');

let startHead = '';
let start = flat(`"t":"req","rid":`);

/** `{"v":N,"t":"req","rid":` */
function startRun(head: string): string {
  if (head !== startHead) {
    start = flat(`${head}"t":"req","rid":`);
    startHead = head;
  }
  return start;
}

function makeContext(
  from: string,
  deviceId: string,
  epoch: number,
  method: string,
  scopes: string,
  tokenId: string | undefined,
): string {
  const token = tokenId === undefined ? '' : `,"tokenId":${json(tokenId)}`;
  return flat(
    `,"from":${json(from)},"deviceId":${json(deviceId)},"epoch":${num(epoch)},"method":${json(method)},"scopes":${scopes}${token}`,
  );
}
let ctxFrom = '';
let ctxDevice = '';
let ctxEpoch = 0;
let ctxMethod = '';
let ctxScopes = '[]';
let ctxToken: string | undefined;
let context = makeContext(ctxFrom, ctxDevice, ctxEpoch, ctxMethod, ctxScopes, ctxToken);

/** `,"from":…,"deviceId":…,"epoch":…,"method":…,"scopes":[…](,"tokenId":…)`: the request's context. */
function contextRun(h: ReqHeader, scopes: string): string {
  if (
    h.from !== ctxFrom ||
    h.deviceId !== ctxDevice ||
    !Object.is(h.epoch, ctxEpoch) ||
    h.method !== ctxMethod ||
    scopes !== ctxScopes ||
    h.tokenId !== ctxToken
  ) {
    context = makeContext(h.from, h.deviceId, h.epoch, h.method, scopes, h.tokenId);
    ctxFrom = h.from;
    ctxDevice = h.deviceId;
    ctxEpoch = h.epoch;
    ctxMethod = h.method;
    ctxScopes = scopes;
    ctxToken = h.tokenId;
  }
  return context;
}

function makeTail(b: number | undefined, tn: string | undefined, ts: number | undefined): string {
  let s = b === undefined ? '' : `,"b":${num(b)}`;
  if (tn !== undefined) s += `,"tn":${json(tn)}`;
  if (ts !== undefined) s += `,"ts":${num(ts)}`;
  return flat(s + '}\n');
}
let tailB: number | undefined;
let tailTool: string | undefined;
let tailWait: number | undefined;
let tail = makeTail(tailB, tailTool, tailWait);

/** `(,"b":1)(,"tn":…)(,"ts":…)}\n` */
function tailRun(b: number | undefined, tn: string | undefined, ts: number | undefined): string {
  if (b !== tailB || tn !== tailTool || !Object.is(ts, tailWait)) {
    tail = makeTail(b, tn, ts);
    tailB = b;
    tailTool = tn;
    tailWait = ts;
  }
  return tail;
}

/** `nodeHeaderLine(h)` for a `req` header (`head`: nodeHeaderLine's `{"v":N,`), without JSON.stringify. */
export function writeReqHeaderLine(head: string, h: ReqHeader): string {
  const id = typeof h.id === 'number' ? num(h.id) : json(h.id);
  let s = startRun(head) + num(h.rid) + ',"id":' + id + ',"timeoutMs":' + num(h.timeoutMs);
  s += contextRun(h, scopesJson(h.scopes));
  if (h.tp !== undefined) s += `,"tp":${json(h.tp)}`;
  if (h.tst !== undefined) s += `,"tst":${json(h.tst)}`;
  return s + tailRun(h.b, h.tn, h.ts);
}

// ---- reading ------------------------------------------------------------------------------

const QUOTE = 0x22;
const T_REQ = runOf('"t":"req","rid":');
const FROM_NODE = runOf(',"from":');
const DEVICE_ID = runOf(',"deviceId":');
const EPOCH = runOf(',"epoch":');
const ID = runOf(',"id":');
const METHOD = runOf(',"method":');
const SCOPES = runOf(',"scopes":[');
const TOKEN_ID = runOf(',"tokenId":');
const TIMEOUT_MS = runOf(',"timeoutMs":');
const TP = runOf(',"tp":');
const TST = runOf(',"tst":');
const B1 = runOf(',"b":1');
const TN = runOf(',"tn":');
const TS = runOf(',"ts":');

// The reader's position in the header (readReqHeader never re-enters).
let at = 0;

/** The header's bytes `want` at `at` (moved past them), or false. */
function take(raw: Buffer, end: number, want: Run): boolean {
  if (at + want.length > end || !runAt(raw, at, want)) return false;
  at += want.length;
  return true;
}

// The strings read last, by the member they were read for, with their bytes: comparing a few
// bytes costs less than making the string again (Buffer#toString is a runtime call).
const lastBytes: Run[] = [];
const lastStrings: string[] = [];
for (let k = 0; k < OTHER; k++) {
  lastBytes.push(runOf([]));
  lastStrings.push('');
}

/** A string without escapes at `at` (moved past it), or undefined; `memo`: the member it is read for. */
function plainString(raw: Buffer, end: number, memo: number): string | undefined {
  if (raw[at] !== QUOTE) return undefined;
  const start = at + 1;
  if (memo !== OTHER) {
    // The last string first: it was read as a plain string, so its bytes then a quote are
    // this string, known without a scan for the quote before the compare.
    const last = lastBytes[memo];
    const close = start + last.length;
    if (close < end && raw[close] === QUOTE && runAt(raw, start, last)) {
      at = close + 1;
      return lastStrings[memo];
    }
  }
  for (let i = start; i < end; i++) {
    const c = raw[i];
    if (c === QUOTE) {
      at = i + 1;
      if (memo === OTHER) return raw.toString('utf8', start, i);
      lastBytes[memo] = runOf(raw.subarray(start, i));
      return (lastStrings[memo] = raw.toString('utf8', start, i));
    }
    if (c < 0x20 || c === 0x5c) return undefined;
  }
  return undefined;
}

// The scopes read last: one credential's requests carry the same list.
let lastScopesBytes = runOf([]);
let lastScopesRead: string[] = [];

/** The scopes' list at `at` (after its `[`; moved past its `]`), or undefined. */
function scopeList(raw: Buffer, end: number): string[] | undefined {
  const start = at;
  // The last list first: read as plain strings, its bytes then a `]` are this list.
  const close = start + lastScopesBytes.length;
  if (close < end && raw[close] === 0x5d && runAt(raw, start, lastScopesBytes)) {
    at = close + 1;
    return lastScopesRead.slice();
  }
  const scopes: string[] = [];
  if (raw[at] !== 0x5d) {
    for (;;) {
      const scope = plainString(raw, end, OTHER);
      if (scope === undefined) return undefined;
      scopes.push(scope);
      if (raw[at] !== 0x2c) break;
      at++;
    }
  }
  if (raw[at++] !== 0x5d) return undefined;
  lastScopesBytes = runOf(raw.subarray(start, at - 1));
  lastScopesRead = scopes.slice();
  return scopes;
}

/** An integer as JSON.stringify writes one at `at` (moved past it: integerAt), or NaN. */
function integer(raw: Buffer, end: number): number {
  let i = raw[at] === 0x2d ? at + 1 : at;
  while (i < end && raw[i] >= 0x30 && raw[i] <= 0x39) i++;
  const n = integerAt(raw, at, i);
  if (!Number.isNaN(n)) at = i;
  return n;
}

/**
 * The string member `name` at `at` (moved past it): undefined if the header has no such member,
 * null if its value is not a plain string.
 */
function optionalString(raw: Buffer, end: number, name: Run, memo: number): string | undefined | null {
  if (!take(raw, end, name)) return undefined;
  return plainString(raw, end, memo) ?? null;
}

// The context of the last header read, as its bytes, with the members read from them: a
// node's requests repeat it, and one compare of its bytes costs less than reading its members
// one by one. It ends with a string's quote or the scopes' `]`, so the only longer context that
// starts with it is the same one with a credential after the scopes (`,"tokenId":…`): read whole,
// never short.
// Compared by Buffer#compare: one call into the runtime, about 1.4 thousand instructions
// whatever the length, against some 13 a byte compared in JavaScript (runAt) for a context of
// 120–200 bytes (docs/decisions/0257-the-request-header-s-context-in-one-run.md).
let seenContext: Buffer = Buffer.alloc(0);
let seenFrom = '';
let seenDeviceId = '';
let seenEpoch = 0;
let seenMethod = '';
let seenScopes: string[] = [];
let seenToken: string | undefined;

/** `,"from":…,"deviceId":…,"epoch":…,"method":…,"scopes":[…](,"tokenId":…)` at `at`, its members then in seen*. */
function readContextRun(raw: Buffer, end: number): boolean {
  const n = seenContext.length;
  if (n > 0 && at + n <= end && raw.compare(seenContext, 0, n, at, at + n) === 0) {
    // A context without a credential starts the same context with one: that one is read whole.
    const after = at + n;
    if (after + TOKEN_ID.length > end || !runAt(raw, after, TOKEN_ID)) {
      at = after;
      return true;
    }
  }
  const start = at;
  if (!take(raw, end, FROM_NODE)) return false;
  const from = plainString(raw, end, FROM);
  if (from === undefined || !take(raw, end, DEVICE_ID)) return false;
  const deviceId = plainString(raw, end, DEVICE);
  if (deviceId === undefined || !take(raw, end, EPOCH)) return false;
  const epoch = integer(raw, end);
  if (Number.isNaN(epoch) || !take(raw, end, METHOD)) return false;
  const method = plainString(raw, end, METHOD_NAME);
  if (method === undefined || !take(raw, end, SCOPES)) return false;
  const scopes = scopeList(raw, end);
  if (scopes === undefined) return false;
  let tokenId: string | undefined;
  if (take(raw, end, TOKEN_ID)) {
    tokenId = plainString(raw, end, TOKEN);
    if (tokenId === undefined) return false;
  }
  seenContext = Buffer.from(raw.subarray(start, at));
  seenFrom = from;
  seenDeviceId = deviceId;
  seenEpoch = epoch;
  seenMethod = method;
  seenScopes = scopes;
  seenToken = tokenId;
  return true;
}

// The tail of the last header read (`b`, `tn`, `ts`), as its bytes (as words: runOf) with its
// members; it ends at the header's `}`.
const NONE = runOf([0x100]); // matches no byte

let seenTail = NONE;
let seenB: 1 | undefined;
let seenTool: string | undefined;
let seenWait: number | undefined;

/** Whether the header's line ends at `at`: `}\n`. */
const lineEndsAt = (raw: Buffer, end: number): boolean => at + 1 < end && raw[at] === 0x7d && raw[at + 1] === 0x0a;

/** `(,"b":1)(,"tn":…)(,"ts":…)` at `at`, up to the header's `}\n`; its members then in seen*. */
function readTailRun(raw: Buffer, end: number): boolean {
  const start = at;
  if (take(raw, end, seenTail) && lineEndsAt(raw, end)) return true;
  at = start;
  const b = take(raw, end, B1) ? 1 : undefined;
  const tn = optionalString(raw, end, TN, TOOL);
  if (tn === null) return false;
  let ts: number | undefined;
  if (take(raw, end, TS)) {
    ts = integer(raw, end);
    if (Number.isNaN(ts)) return false;
  }
  if (!lineEndsAt(raw, end)) return false;
  seenTail = runOf(raw.subarray(start, at));
  seenB = b;
  seenTool = tn;
  seenWait = ts;
  return true;
}

/** Where the line of the header readReqHeader last read ends (its `\n`). */
export let reqLineEnd = 0;

/**
 * The `req` header starting in raw[from, end) if it is exactly what writeReqHeaderLine writes
 * for version `v` (from just after `{"v":N,`), read without JSON.parse and without a search for
 * the line's end (a call into the runtime): the reader finds the `}\n` that ends it (its `\n`
 * then in reqLineEnd), and nothing it reads can hold a line end (a string with a control
 * character is not read here). Undefined for anything else, which JSON.parse then reads. Every
 * member is in the object, in the order JSON.parse makes them, those the header lacks
 * undefined (one shape for every header read here).
 */
export function readReqHeader(
  raw: Buffer,
  from: number,
  end: number,
  v: number,
): (ReqHeader & { v: number }) | undefined {
  at = from;
  if (!take(raw, end, T_REQ)) return undefined;
  const rid = integer(raw, end);
  if (Number.isNaN(rid) || !take(raw, end, ID)) return undefined;
  const id = raw[at] === QUOTE ? plainString(raw, end, OTHER) : integer(raw, end);
  if (id === undefined || Number.isNaN(id) || !take(raw, end, TIMEOUT_MS)) return undefined;
  const timeoutMs = integer(raw, end);
  if (Number.isNaN(timeoutMs) || !readContextRun(raw, end)) return undefined;
  const tp = optionalString(raw, end, TP, OTHER);
  const tst = tp === null ? null : optionalString(raw, end, TST, OTHER);
  if (tp === null || tst === null) return undefined;
  if (!readTailRun(raw, end)) return undefined;
  reqLineEnd = at + 1;
  return {
    v,
    t: 'req',
    rid,
    id,
    timeoutMs,
    from: seenFrom,
    deviceId: seenDeviceId,
    epoch: seenEpoch,
    method: seenMethod,
    scopes: seenScopes.slice(),
    tokenId: seenToken,
    tp,
    tst,
    b: seenB,
    tn: seenTool,
    ts: seenWait,
  };
}
