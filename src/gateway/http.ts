// uWebSockets.js HTTP plumbing. The rules that keep uWS from crashing or losing data live
// here once: onAborted before any await, body chunks copied, every write corked and skipped
// after an abort, backpressure honoured on streams, one syscall per answer (docs/decisions/0050-one-write-per-answer.md).
import { Buffer } from 'node:buffer';
import type { HttpRequest, HttpResponse, TemplatedApp } from '../uws.ts';
import { copyOf } from '../protocol/byte-calls.ts';
import { limitKey, pickClientAddress, type ProxyTrust } from './client-address.ts';
import type { RouteMetrics } from '../metrics.ts';
import type { BufferPool } from './buffer-pool.ts';
import { scheduleWrite, type TurnWriter } from '../turn-writes.ts';

/**
 * How long a client may keep an idle keep-alive connection, advertised as `Keep-Alive:
 * timeout=5` on every answer that leaves the connection open. uWS closes an idle HTTP
 * connection on its own 10 s timeout, swept every 4 s: 8 to 12 s after the last answer, never
 * sooner, and not configurable. Without the hint a client pools the connection on its own
 * default and may send a request into a connection the relay has just closed (the request is
 * lost; a POST is not retried). With it, clients that honour the hint (undici, Node's
 * http.Agent, browsers) drop the connection at least 3 s before the relay can
 * (docs/decisions/0190-keep-alive-hint.md).
 */
export const KEEP_ALIVE_TIMEOUT_S = 5;
export const KEEP_ALIVE_HINT = `timeout=${KEEP_ALIVE_TIMEOUT_S}`;

export const STATUS: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  202: '202 Accepted',
  204: '204 No Content',
  303: '303 See Other',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  402: '402 Payment Required',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  406: '406 Not Acceptable',
  409: '409 Conflict',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

export class BodyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`request body exceeds ${limit} bytes`);
  }
}

/** Headers copied out of the request: uWS invalidates `req` once the handler returns. */
export function copyHeaders(req: HttpRequest, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = req.getHeader(n);
    if (v !== '') out[n] = v;
  }
  return out;
}

/** Every header whose (lower-case) name starts with `prefix`, e.g. `mcp-param-`. */
export function copyHeadersWithPrefix(
  req: HttpRequest,
  prefix: string,
  into: Record<string, string>,
): Record<string, string> {
  req.forEach((k, v) => {
    if (k.startsWith(prefix)) into[k] = v;
  });
  return into;
}

export type Headers = Record<string, string>;

/** The names and values of preEncoded header sets, as bytes, by the set. */
const encodedSets = new WeakMap<Headers, Buffer[]>();

/**
 * `headers` frozen, its names and values encoded once: uWS turns a string argument into UTF-8 on
 * every call and reads a Buffer as it is (an answer's two writeHeader calls took 3.4 thousand
 * instructions with strings, 1.85 with bytes: docs/BENCHMARKS.md, "Instructions per call under
 * callgrind"). For the sets every answer of a kind carries (JSON_HEADERS); a set built per
 * answer is written from its strings.
 */
export function preEncoded<H extends Headers>(headers: H): Readonly<H> {
  const pairs: Buffer[] = [];
  for (const k in headers) pairs.push(Buffer.from(k), Buffer.from(headers[k]));
  encodedSets.set(Object.freeze(headers), pairs);
  return headers;
}

/** STATUS's lines as bytes (writeNow), and the Keep-Alive header every open answer carries. */
const STATUS_LINES: Record<number, Buffer> = Object.fromEntries(
  Object.entries(STATUS).map(([code, line]) => [code, Buffer.from(line)]),
);
const KEEP_ALIVE_NAME = Buffer.from('Keep-Alive');
const KEEP_ALIVE_VALUE = Buffer.from(KEEP_ALIVE_HINT);

/** Whether the serving node is draining (its answers then close the connection). */
export interface DrainState {
  draining: boolean;
}

// The route wrapper of src/gateway/node.ts names its node's drain state (and the route's
// metrics) while a handler runs; the Exchange created at the top of that handler keeps them
// (no per-request patching of `res`). Exchanges outside it (the admin port) count nothing.
let handlerDrainState: DrainState | undefined;
let handlerRoute: RouteMetrics | undefined;
let handlerHead = false;
let handlerArrivedAt = 0;

export function runRoute(
  drain: DrainState,
  handler: (res: HttpResponse, req: HttpRequest) => void,
  res: HttpResponse,
  req: HttpRequest,
  route?: RouteMetrics,
  /** A HEAD request: its Exchange answers without a body. */
  head = false,
  /** The wrapper's reading of the clock as the request arrived (Exchange.arrivedAt). */
  arrivedAt = 0,
): void {
  handlerDrainState = drain;
  handlerRoute = route;
  handlerHead = head;
  handlerArrivedAt = arrivedAt;
  try {
    handler(res, req);
  } finally {
    handlerDrainState = undefined;
    handlerRoute = undefined;
    handlerHead = false;
    handlerArrivedAt = 0;
  }
}

/** Where `Exchange.readBody` delivers the body. */
export interface BodyTarget {
  bodyRead(body: Buffer): void;
  bodyFailed(err: Error): void;
}

/** Told when the client of an Exchange goes away (`Exchange.onAbort`). */
export interface AbortTarget {
  exchangeAborted(): void;
}

// res.cork runs its callback synchronously: one shared callback instead of a closure per answer.
let corking: Exchange;
const writeCorking = () => corking.writeNow();

/** One HTTP request/response. Create it synchronously at the top of the handler. */
export class Exchange implements TurnWriter {
  aborted = false;
  finished = false;
  /** Made on the first onAbort: most exchanges never register one. */
  private abortHandlers?: Array<(() => void) | AbortTarget>;
  private status = 0;
  private headers?: Headers;
  /** Headers a name may repeat in (`Set-Cookie`), as name, value, name, value…; most answers have none. */
  private repeated?: string[];
  private payload?: string | Buffer;
  /** Where `payload` goes back once written or dropped (BufferPool); unset for a payload the caller keeps. */
  private payloadPool?: BufferPool;
  private closeConnection = false;
  private readonly drain = handlerDrainState;
  /** Its responses by status and its body bytes (phonebridge_http_responses_total, phonebridge_bytes_total). */
  readonly route = handlerRoute;

  /**
   * An answer to HEAD: the status and headers `send` is given, Content-Length that of its body,
   * and no body (one would be read as the start of the next answer on a keep-alive connection).
   */
  readonly headOnly: boolean;

  private arrived = handlerArrivedAt;

  /**
   * When the request arrived (ms since the epoch): the route wrapper's reading of the clock,
   * which the steps of a call reuse instead of reading it again, a runtime call each
   * (docs/decisions/0264-a-call-s-clock-is-its-request-s-arrival.md). An Exchange made outside
   * a wrapped handler reads it the first time it is asked, and keeps it.
   */
  get arrivedAt(): number {
    return this.arrived !== 0 ? this.arrived : (this.arrived = Date.now());
  }

  constructor(
    readonly res: HttpResponse,
    opts: { head?: boolean } = {},
  ) {
    this.headOnly = opts.head ?? handlerHead;
    res.onAborted(() => {
      this.aborted = true;
      const handlers = this.abortHandlers;
      this.abortHandlers = undefined;
      for (const h of handlers ?? [])
        if (typeof h === 'function') h();
        else h.exchangeAborted();
    });
  }

  /** `h` runs once the client has gone (at once if it already has); an object gets `exchangeAborted()`. */
  onAbort(h: (() => void) | AbortTarget): void {
    if (!this.aborted) (this.abortHandlers ??= []).push(h);
    else if (typeof h === 'function') h();
    else h.exchangeAborted();
  }

  /**
   * Reads the whole body, copying each chunk (uWS reuses its buffers). Call before any await.
   * Past `limit` it answers 413 at once (`Connection: close`) and drops the rest of the body as
   * it comes, up to LINGER_MAX_BYTES or LINGER_MAX_MS, then closes: a client still sending
   * gets to read the 413 instead of a reset (`Lingering`). The promise rejects with
   * BodyTooLarge and later writes are no-ops.
   */
  body(limit: number, tooLarge: () => { headers: Headers; body: string } = defaultTooLarge(limit)): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.onAbort(() => reject(new Error('client aborted')));
      this.readBody(limit, tooLarge, { bodyRead: resolve, bodyFailed: reject });
    });
  }

  /**
   * `body` for a caller that keeps its state in an object (no promise, no closure of its own):
   * `target.bodyRead` gets the body, or `bodyFailed` the BodyTooLarge (the 413 already sent).
   * A client that goes away mid-body calls neither. Call before any await.
   */
  readBody(limit: number, tooLarge: () => { headers: Headers; body: string }, target: BodyTarget): void {
    let first: Buffer | undefined;
    let chunks: Buffer[] | undefined;
    let size = 0;
    let refused: Lingering | undefined;
    this.res.onData((chunk, isLast) => {
      this.route?.bytesIn(chunk.byteLength);
      if (refused) return refused.dropped(chunk.byteLength, isLast);
      size += chunk.byteLength;
      if (size > limit) {
        const answer = tooLarge();
        refused = this.refuseBody(413, answer.headers, answer.body);
        target.bodyFailed(new BodyTooLarge(limit));
        refused.dropped(0, isLast);
        return;
      }
      // A copy: uWS reuses the chunk's memory.
      const copy = copyOf(chunk, chunk.byteLength);
      if (first === undefined) first = copy;
      else (chunks ??= [first]).push(copy);
      if (isLast) target.bodyRead(chunks ? Buffer.concat(chunks, size) : first);
    });
  }

  /**
   * A header of the response `send` will write, besides its `headers`: for a name that may come
   * more than once (each `Set-Cookie` is its own header line, RFC 6265 §3).
   */
  appendHeader(name: string, value: string): void {
    if (this.aborted || this.finished) return;
    (this.repeated ??= []).push(name, value);
  }

  /**
   * A complete response, written at the end of this turn; a no-op after an abort or a previous
   * end. A `body` taken from `pool` is given back to it once uWS has copied it, or dropped.
   */
  send(status: number, headers: Headers, body?: string | Buffer, closeConnection = false, pool?: BufferPool): void {
    if (this.aborted || this.finished) {
      if (pool && body instanceof Buffer) pool.release(body);
      return;
    }
    this.finished = true;
    this.status = status;
    this.headers = headers;
    this.payload = body;
    this.payloadPool = pool;
    this.closeConnection = closeConnection;
    scheduleWrite(this);
  }

  /**
   * Refuses the body being read: the answer goes out now (from uWS's data callback, which has
   * this socket corked), in chunked form so that the response stays open — and uWS keeps
   * reading — until `Lingering` ends it.
   */
  private refuseBody(status: number, headers: Headers, body: string): Lingering {
    this.finished = true;
    const res = this.res;
    res.writeStatus(STATUS[status] ?? `${status} Status`);
    for (const k in headers) res.writeHeader(k, headers[k]);
    res.writeHeader('Connection', 'close');
    res.write(body);
    this.route?.responded(status, body);
    return new Lingering(this);
  }

  /** Answers end with `Connection: close` once the node drains, so keep-alive clients move on. */
  get closing(): boolean {
    return this.drain?.draining === true;
  }

  writeQueued(): void {
    const pool = this.payloadPool;
    const payload = this.payload;
    try {
      if (this.aborted) return;
      // eslint-disable-next-line @typescript-eslint/no-this-alias -- the writer being flushed, read by the write path to tell its own cork from a foreign one
      corking = this;
      this.res.cork(writeCorking);
    } finally {
      // uWS copies what the socket does not take at once: the payload is no longer read.
      if (pool) {
        this.payloadPool = this.payload = undefined;
        pool.release(payload as Buffer);
      }
    }
  }

  /** Inside this response's cork. */
  writeNow(): void {
    const res = this.res;
    const headers = this.headers!;
    const close = this.closeConnection || this.closing;
    res.writeStatus(STATUS_LINES[this.status] ?? `${this.status} Status`);
    const encoded = encodedSets.get(headers);
    if (encoded) for (let i = 0; i < encoded.length; i += 2) res.writeHeader(encoded[i], encoded[i + 1]);
    else for (const k in headers) res.writeHeader(k, headers[k]);
    const repeated = this.repeated;
    if (repeated) for (let i = 0; i < repeated.length; i += 2) res.writeHeader(repeated[i], repeated[i + 1]);
    if (!close) res.writeHeader(KEEP_ALIVE_NAME, KEEP_ALIVE_VALUE);
    if (this.headOnly) {
      const p = this.payload;
      // Both as headers, endWithoutBody() without arguments: uWS 20.30's endWithoutBody(length)
      // leaves the connection waiting for that many body bytes (the next request on it is never
      // answered), and an `undefined` length is read as 2^63. The client closes on `Connection: close`.
      res.writeHeader(
        'Content-Length',
        String(p === undefined ? 0 : typeof p === 'string' ? Buffer.byteLength(p) : p.length),
      );
      if (close) res.writeHeader('Connection', 'close');
      res.endWithoutBody();
      this.route?.responded(this.status);
    } else {
      res.end(this.payload ?? '', close);
      this.route?.responded(this.status, this.payload);
    }
    this.headers = this.payload = this.repeated = undefined;
  }

  json(status: number, value: unknown, headers: Headers = {}): void {
    this.send(status, { 'Content-Type': 'application/json', ...headers }, JSON.stringify(value));
  }

  /** `{"error": code, "message": …}` — the relay's own HTTP error shape outside JSON-RPC. */
  error(status: number, code: string, message: string, headers: Headers = {}): void {
    this.json(status, { error: code, message }, headers);
  }
}

/** How much of a refused body the relay still reads and drops, and for how long at most. */
export const LINGER_MAX_BYTES = 12 * 1024 * 1024;
export const LINGER_MAX_MS = 5_000;

/**
 * A lingering close (as nginx's `lingering_close`): a client that is still sending when its
 * body is refused reads the refusal only if the relay does not reset the connection under it,
 * and closing with unread data does exactly that. So the rest of the body is read and dropped,
 * and the response ends (closing the connection) when the body is complete — or, bounded, after
 * LINGER_MAX_BYTES more or LINGER_MAX_MS (docs/OPERATIONS.md "Limits").
 */
class Lingering implements AbortTarget {
  private droppedBytes = 0;
  private done = false;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly ex: Exchange) {
    this.timer = setTimeout(() => this.cut(), LINGER_MAX_MS).unref();
    ex.onAbort(this);
  }

  /** A chunk of the refused body (inside uWS's data callback). */
  dropped(bytes: number, isLast: boolean): void {
    this.droppedBytes += bytes;
    if (isLast) this.end();
    else if (this.droppedBytes > LINGER_MAX_BYTES) this.cut();
  }

  exchangeAborted(): void {
    this.done = true;
    clearTimeout(this.timer);
  }

  /**
   * The whole body is in: the response's last chunk. The client was told `Connection: close`
   * and closes; uWS's idle timeout ends the connection otherwise. (uWS's own close-at-end would
   * write its `Connection` header into the chunked body: docs/decisions/0190-keep-alive-hint.md.)
   */
  private end(): void {
    if (this.done || this.ex.aborted) return;
    this.done = true;
    clearTimeout(this.timer);
    const res = this.ex.res;
    res.cork(() => res.end(undefined, false));
  }

  /** Past the bounds: the connection is closed under the client, which has the 413's head. */
  private cut(): void {
    if (this.done || this.ex.aborted) return;
    this.done = true;
    clearTimeout(this.timer);
    this.ex.res.close();
  }
}

function defaultTooLarge(limit: number) {
  return () => ({
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ error: 'too_large', message: new BodyTooLarge(limit).message }),
  });
}

/** The order an `Allow` header names methods in. */
const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS'];

/**
 * The answer of a path to a method it does not serve: 405 with `Allow` naming the methods it does
 * (RFC 9110 §15.5.6) and `{"error":"method_not_allowed","message":"use …"}` — without the body for
 * HEAD, as a route wrapper's `any` handler makes a headOnly Exchange for it (src/gateway/node.ts).
 * Register it with `any` on the path once its methods are registered.
 */
export function methodNotAllowed(served: readonly string[]): (res: HttpResponse) => void {
  const sorted = METHOD_ORDER.filter((m) => served.includes(m));
  const allow = sorted.join(', ');
  const use = sorted.length === 1 ? sorted[0] : `${sorted.slice(0, -1).join(', ')} or ${sorted.at(-1)}`;
  return (res) => new Exchange(res).error(405, 'method_not_allowed', `use ${use}`, { Allow: allow });
}

type Route = (res: HttpResponse, req: HttpRequest) => void;

/**
 * Routes registered by method, so that a path answers HEAD wherever it answers GET (the same
 * answer without its body: the gateway gives a `head` handler's Exchange `headOnly`), and any
 * method it does not serve with 405 and `Allow` (methodNotAllowed, without a body for HEAD): a
 * body after a HEAD answer would be read as the start of the next answer on the keep-alive
 * connection. For a feature that registers several paths of its own.
 */
export class MethodRoutes {
  /** The methods each path serves; false once a path has its own answer to the others. */
  private readonly served = new Map<string, string[] | false>();

  constructor(private readonly app: TemplatedApp) {}

  get(path: string, handler: Route): void {
    this.app.get(path, handler);
    this.app.head(path, handler);
    this.note(path, 'GET', 'HEAD');
  }

  post(path: string, handler: Route): void {
    this.app.post(path, handler);
    this.note(path, 'POST');
  }

  patch(path: string, handler: Route): void {
    this.app.patch(path, handler);
    this.note(path, 'PATCH');
  }

  del(path: string, handler: Route): void {
    this.app.del(path, handler);
    this.note(path, 'DELETE');
  }

  options(path: string, handler: Route): void {
    this.app.options(path, handler);
    this.note(path, 'OPTIONS');
  }

  /** The path's own answer to the methods it does not serve (instead of the generic 405). */
  otherMethods(path: string, handler: Route): void {
    this.app.any(path, handler);
    this.served.set(path, false);
  }

  /** The generic 405 for every path without its own; call once every route is registered. */
  finish(): void {
    for (const [path, methods] of this.served) {
      if (methods) this.app.any(path, methodNotAllowed(methods));
    }
  }

  private note(path: string, ...methods: string[]): void {
    const served = this.served.get(path);
    if (served === false) return;
    if (served) served.push(...methods);
    else this.served.set(path, methods);
  }
}

/**
 * The rate-limit key of the request's client: its address as src/gateway/client-address.ts
 * decides it (X-Forwarded-For only as far as the operator trusts it), IPv6 by /64. Call it
 * before any await (it reads `req`).
 */
export function clientAddress(res: HttpResponse, req: HttpRequest, trust: ProxyTrust): string {
  const forwardedFor: string[] = [];
  if (trust.trustProxy)
    req.forEach((k, v) => {
      if (k === 'x-forwarded-for') forwardedFor.push(v);
    });
  return limitKey(pickClientAddress(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedFor, trust));
}
