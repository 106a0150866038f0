// uWebSockets.js HTTP plumbing. The rules that keep uWS from crashing or losing data live
// here once: onAborted before any await, body chunks copied, every late write corked and
// skipped after an abort, backpressure honoured on streams.
import type { HttpRequest, HttpResponse } from '../uws.ts';
import { limitKey, pickClientAddress, type ProxyTrust } from './client-address.ts';

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

/** One HTTP request/response. Create it synchronously at the top of the handler. */
export class Exchange {
  aborted = false;
  finished = false;
  private abortHandlers: Array<() => void> = [];

  constructor(readonly res: HttpResponse) {
    res.onAborted(() => {
      this.aborted = true;
      for (const h of this.abortHandlers) h();
      this.abortHandlers = [];
    });
  }

  onAbort(h: () => void): void {
    if (this.aborted) h();
    else this.abortHandlers.push(h);
  }

  /**
   * Reads the whole body, copying each chunk (uWS reuses its buffers). Call before any await.
   * Past `limit` it answers 413 at once and closes the connection, so the rest is never read;
   * the promise rejects with BodyTooLarge and later writes are no-ops.
   */
  body(limit: number, tooLarge: () => { headers: Headers; body: string } = defaultTooLarge(limit)): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let failed = false;
      this.onAbort(() => reject(new Error('client aborted')));
      this.res.onData((chunk, isLast) => {
        if (failed) return;
        size += chunk.byteLength;
        if (size > limit) {
          failed = true;
          const answer = tooLarge();
          this.send(413, answer.headers, answer.body, true);
          reject(new BodyTooLarge(limit));
          return;
        }
        chunks.push(Buffer.from(chunk.slice(0)));
        if (isLast) resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
      });
    });
  }

  /** Writes a complete response; a no-op after an abort or a previous end. */
  send(status: number, headers: Headers, body?: string | Buffer, closeConnection = false): void {
    if (this.aborted || this.finished) return;
    this.finished = true;
    this.res.cork(() => {
      this.res.writeStatus(STATUS[status] ?? `${status} Status`);
      for (const k in headers) this.res.writeHeader(k, headers[k]);
      this.res.end(body ?? '', closeConnection);
    });
  }

  json(status: number, value: unknown, headers: Headers = {}): void {
    this.send(status, { 'Content-Type': 'application/json', ...headers }, JSON.stringify(value));
  }

  /** `{"error": code, "message": …}` — the relay's own HTTP error shape outside JSON-RPC. */
  error(status: number, code: string, message: string, headers: Headers = {}): void {
    this.json(status, { error: code, message }, headers);
  }
}

function defaultTooLarge(limit: number) {
  return () => ({
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ error: 'too_large', message: new BodyTooLarge(limit).message }),
  });
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
