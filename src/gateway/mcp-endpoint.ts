// /mcp for the session revisions (2025-03-26, 2025-06-18, 2025-11-25): which handler takes a
// request. Copy its headers and check its Origin, authenticate, bind the session; then a POST
// takes the fast path (fast-post.ts) or the general one below, which reads the body and hands
// initialize to session-opener.ts, one request to single-answer.ts, a batch's requests to
// in-flight.ts, and answers notifications itself; GET and DELETE act on the session.
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import type { HttpRequest, HttpResponse, TemplatedApp } from '../uws.ts';
import { BodyTooLarge, Exchange } from './http.ts';
import { collectHeaders, type McpHeaders } from './mcp-headers.ts';
import { FastPost, inFlightHash, inFlightKey, sessionHashOf, type FastPostHost } from './fast-post.ts';
import { InFlightCalls } from './in-flight.ts';
import { SessionOpener } from './session-opener.ts';
import { answerOne, type AnswerHost } from './single-answer.ts';
import { GetStreams } from './get-streams.ts';
import { SessionLookup } from './session-lookup.ts';
import { ClientAuth, type Bound } from './client-auth.ts';
import { readClientRequest } from '../protocol/request-bytes.ts';
import { postMediaRefusal } from '../protocol/media-types.ts';
import type { LocalRoute } from './route.ts';
import { JSON_HEADERS, StatelessEndpoint } from './mcp-stateless.ts';
import { classifyEra } from '../protocol/stateless.ts';
import { SseStream } from './sse.ts';
import { EventStream, newStreamId } from './session-streams.ts';
import { BusUnavailableError } from '../bus/index.ts';
import { presentedToken } from './auth.ts';
import { classify, classifyClientMessage, errorResponse, parseBody } from '../protocol/jsonrpc.ts';
import { INVALID_REQUEST, relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import {
  allowsBatch,
  getOrDeleteEra,
  isSessionRevision,
  isStatelessRevision,
  SESSION_REVISIONS,
} from '../protocol/revisions.ts';
import { requestTimeoutMs } from '../protocol/timeouts.ts';
import { callerContextJson, withCallerContext } from '../protocol/caller.ts';
import { MAX_FRAME_BYTES, notificationFrameBytes } from './device-connection.ts';
import { framesTooBig, observeMcpRequest } from '../metrics.ts';
import type { SessionRecord } from '../bus/types.ts';
import type { GatewayContext } from './context.ts';
import type { CredentialSource, McpMount } from './features.ts';
import { tracingOn } from '../observability/tracing.ts';
import { exemplarTraceId, noteHttpRequest, requestLogFields } from '../observability/relay-spans.ts';
import { RequestLog } from './request-log.ts';

export function registerMcpRoutes(
  app: TemplatedApp,
  ctx: GatewayContext,
): McpMount & { close(): void; readonly oauthOffered: boolean } {
  const endpoint = new McpEndpoint(ctx);
  const serve = (pattern: string, source?: CredentialSource<unknown>) => {
    app.post(pattern, (res, req) => endpoint.post(res, req, source));
    app.get(pattern, (res, req) => endpoint.get(res, req, source));
    app.del(pattern, (res, req) => endpoint.delete(res, req, source));
    app.any(pattern, (res) =>
      new Exchange(res).error(405, 'method_not_allowed', 'use POST, GET or DELETE', { Allow: 'POST, GET, DELETE' }),
    );
  };
  serve('/mcp');
  return {
    close: () => endpoint.close(),
    mount: (pattern, source) => serve(pattern, source),
    explainUnknownKey: (fn) => endpoint.clientAuth.explainers.push(fn),
    offerOAuth: (resourceMetadataUrl) => (endpoint.clientAuth.resourceMetadata = resourceMetadataUrl),
    get oauthOffered() {
      return endpoint.clientAuth.resourceMetadata !== undefined;
    },
  };
}

class McpEndpoint implements FastPostHost, AnswerHost {
  private allowedOriginSet?: Set<string>;
  private readonly sessions: SessionLookup;
  /** Who is calling: keys, mounted routes' sources, features' explanations. */
  readonly clientAuth: ClientAuth;
  /** GET streams of this node's sessions. */
  private readonly getStreams: GetStreams;
  /** Requests in flight on this node, by session and client id, for notifications/cancelled. */
  readonly calls: InFlightCalls;
  private readonly opener: SessionOpener;

  private readonly stateless: StatelessEndpoint;
  /** Requests on mounted routes, by their copied headers (begin() binds them). */
  private readonly bound = new WeakMap<McpHeaders, Bound>();
  private readonly requestLog: RequestLog;

  constructor(readonly ctx: GatewayContext) {
    this.requestLog = new RequestLog(ctx.log);
    this.getStreams = new GetStreams(ctx);
    this.sessions = new SessionLookup(ctx);
    this.clientAuth = new ClientAuth(ctx);
    this.calls = new InFlightCalls(ctx);
    this.opener = new SessionOpener(ctx, this.sessions, (...a) => this.observe(...a));
    this.stateless = new StatelessEndpoint(ctx, (ex, cred, deviceId, msg, related, timeoutMs, toolHeaders) =>
      this.calls.forward(ex, cred, deviceId, undefined, msg, related, undefined, timeoutMs, toolHeaders),
    );
  }

  /** Built on first use: the public URL is final only once the node listens. */
  private get allowedOrigins(): Set<string> {
    return (this.allowedOriginSet ??= new Set([
      new URL(this.ctx.config.publicUrl).origin,
      ...this.ctx.config.allowedOrigins,
    ]));
  }

  /** Synchronous prelude shared by every verb: copy headers, DNS-rebinding check. */
  private begin(
    res: HttpResponse,
    req: HttpRequest,
    source: CredentialSource<unknown> | undefined,
    readsLastEventId: boolean,
  ): { ex: Exchange; h: McpHeaders } | undefined {
    const ex = new Exchange(res);
    const h = collectHeaders(req, this.ctx.config.trustProxy, readsLastEventId);
    if (source) this.bound.set(h, { source, captured: source.capture(req) });
    if (tracingOn) noteHttpRequest(ex, req, h);
    if (h.origin && !this.allowedOrigins.has(h.origin)) {
      ex.error(403, 'forbidden_origin', 'this Origin may not call the relay');
      return undefined;
    }
    return { ex, h };
  }

  /** Stops the endpoint's timers (node shutdown). */
  close(): void {
    this.sessions.close();
  }

  post(res: HttpResponse, req: HttpRequest, source?: CredentialSource<unknown>): void {
    const begun = this.begin(res, req, source, false);
    if (!begun) return;
    const { ex, h } = begun;
    // Before anything else, as the MCP SDK's server does: a body not declared JSON is 415, an
    // Accept that rules out JSON answers 406 (docs/decisions/0215-post-media-types.md).
    const refused = postMediaRefusal(h['content-type'], h.accept);
    if (refused) {
      // The body is read (and dropped) first, so that the connection serves the client's next request.
      ex.body(MAX_FRAME_BYTES, tooLargeBody).then(
        () => ex.send(refused.status, JSON_HEADERS, errorResponse(null, refused.error)),
        () => {}, // over 256 KiB (answered 413) or the client left
      );
      return;
    }
    // The common call, from a key in the cache: read the body into an object, then straight on
    // (fastPost), or the general path below with the body read. Mounted routes resolve their
    // own credentials, on the general path.
    const cred = source ? undefined : this.ctx.auth.cached(presentedToken(h), ex.arrivedAt);
    // With tracing on, every request takes the general path: its SERVER span and the trace
    // context written into the forwarded request live there (docs/decisions/0110-tracing-off-by-default-explicit-context.md).
    if (
      !tracingOn &&
      cred &&
      !cred.account.locked &&
      h['mcp-session-id'] !== undefined &&
      this.ctx.bus.sessions.touchNow
    ) {
      ex.readBody(MAX_FRAME_BYTES, tooLargeBody, new FastPost(this, ex, h, cred));
      return;
    }
    const body = ex.body(MAX_FRAME_BYTES, tooLargeBody);
    body.catch(() => {}); // observed below; avoid an unhandled rejection on early exits
    this.handlePost(ex, h, body).catch((err) => this.fail(ex, err));
  }

  failPost(ex: Exchange, err: unknown): void {
    this.fail(ex, err);
  }

  /** The general path for a body FastPost read but does not take. */
  slowPost(ex: Exchange, h: McpHeaders, body: Buffer): void {
    this.handlePost(ex, h, Promise.resolve(body)).catch((err) => this.fail(ex, err));
  }

  /**
   * One request of a cached key, in a session answered at once (touchNow), for a phone on
   * this node that is ready: answered without a wait, a promise or a closure of its own, its
   * frame built from the body's bytes (docs/decisions/0131-synchronous-local-calls.md). For a
   * phone on another node whose owner is remembered, the same, its params crossing the bus
   * as bytes (docs/decisions/0134-cross-node-bytes.md).
   * False when anything about it needs the general path (nothing was done then).
   */
  fastPost(call: FastPost, raw: Buffer): boolean {
    const { h, cred } = call;
    const versionHeader = h['mcp-protocol-version'];
    if (versionHeader && !isSessionRevision(versionHeader)) return false;
    const client = call.client();
    const req = readClientRequest(raw, client.memo);
    if (!req || req.method === 'initialize' || this.ctx.config.budgets.maxBatch < 1) return false;
    // The request's arrival, read once by the route wrapper, for the steps below: the session's
    // touch, the remembered owner and the call's deadline, which so counts from the request's
    // arrival even when its body came later (docs/decisions/0264-a-call-s-clock-is-its-request-s-arrival.md).
    const now = call.ex.arrivedAt;
    // The in-process store, or this node's lease on a Redis session
    // (docs/decisions/0133-session-leases.md); undefined sends it to the general path, which asks the bus.
    const session = this.ctx.bus.sessions.touchNow!(h['mcp-session-id'], this.ctx.config.sessionIdleMs, now);
    if (!session || session.tokenId !== cred.token.id) return false;
    // Its id is in use in the session: the general path refuses it (InFlightCalls.forward).
    const key = inFlightKey(session.id, req.id);
    const keyHash = inFlightHash(sessionHashOf(session), req.id);
    if (this.calls.has(key, keyHash)) return false;
    const deviceId = session.deviceId;
    if (this.ctx.hub.isRevoked({ tokenId: cred.token.id, deviceId, accountId: cred.account.id })) return false;
    const conn = this.ctx.router.readyLocal(deviceId);
    const owner = conn ? undefined : this.ctx.router.knownRemoteOwner(deviceId, now);
    if (!conn && !owner) return false;
    this.sessions.note(session, now);
    call.start(session, req, raw.length);
    const timeoutMs = requestTimeoutMs(
      req.method,
      req.toolName === undefined
        ? undefined
        : { name: req.toolName, arguments: req.timeoutS === undefined ? undefined : { timeout_s: req.timeoutS } },
      this.ctx.config.requestTimeoutMs,
    );
    call.timeoutMs = timeoutMs;
    const callerJson = callerContextJson(cred.token);
    const route = conn
      ? this.ctx.router.startLocal(conn, req, callerJson, client.caller, call, timeoutMs, now)
      : this.ctx.router.startRemote(deviceId, owner!, req, callerJson, client.caller, call, timeoutMs, now);
    if (!route.done) {
      call.route = route;
      call.key = key;
      call.keyHash = keyHash;
      this.calls.add(key, keyHash, call);
      call.ex.onAbort(call);
    }
    return true;
  }

  /** A FastPost's request is answered (or failed): no longer cancellable by the client. */
  settled(call: FastPost): void {
    if (call.key !== undefined) this.calls.delete(call.key, call.keyHash);
  }

  /** Opens a FastPost's SSE stream: the answer is slow, or something related came first. */
  openPostStream(call: FastPost): EventStream {
    const session = call.session!;
    const stream = new EventStream(
      this.ctx.bus,
      session.id,
      newStreamId({ deadline: Date.now() + call.timeoutMs }),
      new SseStream(call.ex, {}),
    );
    if (session.revision === '2025-11-25') void stream.prime();
    return stream;
  }

  cancelRoute(route: LocalRoute): void {
    this.ctx.router.cancelRoute(route);
  }

  orphanRoute(route: LocalRoute): void {
    this.ctx.router.orphanRoute(route);
  }

  private fail(ex: Exchange, err: unknown): void {
    if (err instanceof BodyTooLarge) {
      ex.send(413, JSON_HEADERS, errorResponse(null, relayError('too_large', 'request body over 256 KiB')));
      return;
    }
    if (ex.aborted) return;
    if (err instanceof BusUnavailableError) {
      ex.send(503, { ...JSON_HEADERS, 'Retry-After': '1' }, errorResponse(null, relayError('relay_unavailable')));
      return;
    }
    this.ctx.log.error({ err: String(err), ...(tracingOn && requestLogFields(ex)) }, 'mcp request failed');
    ex.send(500, JSON_HEADERS, errorResponse(null, relayError('relay_error')));
  }

  private async handlePost(ex: Exchange, h: McpHeaders, bodyP: Promise<Buffer>): Promise<void> {
    const started = performance.now();
    const cred = await this.clientAuth.authenticate(ex, h, this.bound.get(h));
    if (!cred) return;
    const raw = await bodyP;
    const parsed = parseBody(raw);
    if (!parsed.ok) return ex.send(400, JSON_HEADERS, errorResponse(null, parsed.error));
    if (classifyEra(h, parsed.value) === 'stateless')
      return this.stateless.post(ex, h, cred, parsed.value, started, raw.length);
    const isBatch = Array.isArray(parsed.value);
    const items = isBatch ? (parsed.value as unknown[]) : [parsed.value];
    if (items.length === 0)
      return ex.send(
        400,
        JSON_HEADERS,
        errorResponse(null, { code: INVALID_REQUEST, message: 'Invalid Request: empty batch' }),
      );

    const versionHeader = h['mcp-protocol-version'];
    if (versionHeader && !isSessionRevision(versionHeader)) {
      return ex.send(
        400,
        JSON_HEADERS,
        errorResponse(
          null,
          // A served stateless revision reaches here only with a session-era body (classifyEra).
          isStatelessRevision(versionHeader)
            ? {
                code: INVALID_REQUEST,
                message: `Bad Request: MCP-Protocol-Version ${versionHeader} has no sessions, batches or initialize: send each request on its own, without Mcp-Session-Id, its revision in params._meta (session revisions: ${SESSION_REVISIONS.join(', ')})`,
              }
            : unsupportedVersion(versionHeader),
        ),
      );
    }

    const first = classify(items[0]);
    if (!isBatch && first.kind === 'request' && first.msg.method === 'initialize') {
      if (h['mcp-session-id']) {
        return ex.send(
          400,
          JSON_HEADERS,
          errorResponse(first.msg.id, {
            code: INVALID_REQUEST,
            message: 'Invalid Request: this session is already initialized',
          }),
        );
      }
      return this.opener.open(ex, h, cred, first.msg, started, raw.length);
    }

    const session = await this.sessions.find(ex, h, cred);
    if (!session) return;
    if (isBatch && !allowsBatch(session.revision)) {
      return ex.send(
        400,
        JSON_HEADERS,
        errorResponse(null, {
          code: INVALID_REQUEST,
          message: `Invalid Request: JSON-RPC batches are not supported in revision ${session.revision}`,
        }),
      );
    }
    const maxBatch = this.ctx.config.budgets.maxBatch;
    if (items.length > maxBatch)
      return ex.send(
        400,
        JSON_HEADERS,
        errorResponse(null, {
          code: INVALID_REQUEST,
          message: `Invalid Request: a batch of ${items.length} messages; at most ${maxBatch} are accepted`,
        }),
      );

    if (!isBatch && first.kind === 'request') {
      const checked = classifyClientMessage(items[0]);
      if (checked.kind === 'invalid') return ex.send(400, JSON_HEADERS, errorResponse(checked.id, checked.error));
      return answerOne(this, ex, h, cred, session, first.msg, started, raw.length);
    }

    const messages = items.map((item) => classifyClientMessage(item));
    // Measured before anything is forwarded: a notification the phone could not receive refuses
    // the whole POST, and nothing in it reaches the phone.
    const notes = new Map<number, Record<string, unknown>>();
    for (let i = 0; i < messages.length; i++) {
      const c = messages[i];
      if (c.kind !== 'notification' || !forwardedToPhone(c.msg.method)) continue;
      const params = withCallerContext(c.msg.params, cred.token);
      const bytes = notificationFrameBytes(c.msg.method, params);
      if (bytes > MAX_FRAME_BYTES) {
        framesTooBig.client.inc();
        return ex.send(
          413,
          JSON_HEADERS,
          errorResponse(
            null,
            relayError(
              'too_large',
              `the notification's frame to the phone would be ${bytes} bytes (caller context included), over ${MAX_FRAME_BYTES}`,
            ),
          ),
        );
      }
      notes.set(i, params);
    }

    const answers: Array<Promise<Buffer>> = [];
    for (let i = 0; i < messages.length; i++) {
      const c = messages[i];
      if (c.kind === 'invalid') {
        if (!isBatch) return ex.send(400, JSON_HEADERS, errorResponse(c.id, c.error));
        answers.push(Promise.resolve(Buffer.from(errorResponse(c.id, c.error))));
      } else if (c.kind === 'request') {
        if (c.msg.method === 'initialize')
          answers.push(
            Promise.resolve(
              Buffer.from(
                errorResponse(c.msg.id, {
                  code: INVALID_REQUEST,
                  message: 'Invalid Request: initialize must not be batched',
                }),
              ),
            ),
          );
        else answers.push(this.calls.forward(ex, cred, session.deviceId, session.id, c.msg).then((o) => o.frame));
      } else if (c.kind === 'notification') {
        const params = notes.get(i);
        if (params) void this.ctx.router.notify(session.deviceId, c.msg.method, params);
        else this.clientNotification(session, c.msg.method, c.msg.params);
      }
      // Responses from the client answer nothing: the relay never forwards phone requests.
    }
    if (answers.length === 0) return ex.send(202, {}, undefined);
    const out = joinBatch(await Promise.all(answers));
    ex.send(200, JSON_HEADERS, out);
    this.observe('batch', started, raw.length, out.length, ex.aborted ? 'aborted' : 'ok', ex);
  }

  /** The two client notifications the relay acts on itself (forwardedToPhone says which). */
  private clientNotification(
    session: SessionRecord,
    method: string,
    params: Record<string, unknown> | undefined,
  ): void {
    if (method !== 'notifications/cancelled') return; // notifications/initialized: the relay initialized the phone itself
    const requestId = params?.requestId;
    if (typeof requestId !== 'string' && typeof requestId !== 'number') return;
    // Not here: the request is on another node.
    if (!this.calls.cancel(session.id, requestId)) void this.ctx.router.broadcastCancel(session.id, requestId);
  }

  /** GET and DELETE: session revisions only; authenticated, with a live session of the caller. */
  private withSession(
    res: HttpResponse,
    req: HttpRequest,
    source: CredentialSource<unknown> | undefined,
    handle: (ex: Exchange, h: McpHeaders, session: SessionRecord) => Promise<void>,
    check?: (ex: Exchange, h: McpHeaders) => boolean,
  ): void {
    const begun = this.begin(res, req, source, true);
    if (!begun) return;
    const { ex, h } = begun;
    // Before authentication, as the media-type refusals of a POST: the headers alone decide.
    const era = getOrDeleteEra(h['mcp-session-id'], h['mcp-protocol-version']);
    if (era === 'stateless') return this.statelessMethodNotAllowed(ex);
    if (era === 'unsupported-version')
      return ex.send(400, JSON_HEADERS, errorResponse(null, unsupportedVersion(h['mcp-protocol-version'])));
    if (check && !check(ex, h)) return;
    void (async () => {
      const cred = await this.clientAuth.authenticate(ex, h, this.bound.get(h));
      if (!cred) return;
      const session = await this.sessions.find(ex, h, cred);
      if (!session || ex.aborted) return;
      await handle(ex, h, session);
    })().catch((err) => this.fail(ex, err));
  }

  get(res: HttpResponse, req: HttpRequest, source?: CredentialSource<unknown>): void {
    this.withSession(
      res,
      req,
      source,
      (ex, h, session) => this.getStreams.open(ex, h, session),
      (ex, h) => {
        if ((h.accept ?? '').includes('text/event-stream')) return true;
        ex.send(
          406,
          JSON_HEADERS,
          errorResponse(null, {
            code: INVALID_REQUEST,
            message: 'Not Acceptable: GET /mcp needs Accept: text/event-stream',
          }),
        );
        return false;
      },
    );
  }

  delete(res: HttpResponse, req: HttpRequest, source?: CredentialSource<unknown>): void {
    this.withSession(res, req, source, async (ex, _h, session) => {
      await this.ctx.bus.sessions.delete(session.id);
      this.sessions.forget(session.id);
      // Every node drops its lease on the session (docs/decisions/0133-session-leases.md) and
      // ends its streams; awaited, so the session is refused everywhere once the client hears back.
      await this.ctx.bus.publishControl({ type: 'sessions_ended', sessionIds: [session.id] }).catch(() => {});
      this.getStreams.endChannel(session.id);
      this.ctx.hub.endStreams({ deviceId: session.deviceId, sessionId: session.id });
      ex.send(200, {}, undefined);
    });
  }

  /** 2026-07-28 has no GET stream and no session to delete. */
  private statelessMethodNotAllowed(ex: Exchange): void {
    ex.send(
      405,
      { ...JSON_HEADERS, Allow: 'POST' },
      errorResponse(null, {
        code: INVALID_REQUEST,
        message: 'Method Not Allowed: revision 2026-07-28 serves POST only',
      }),
    );
  }

  observe(method: string, started: number, bytesIn: number, bytesOut: number, outcome: string, ex?: Exchange): void {
    const seconds = (performance.now() - started) / 1000;
    observeMcpRequest(method, outcome, seconds, 'session', tracingOn && ex ? exemplarTraceId(ex) : undefined);
    this.requestLog.write(method, seconds, bytesIn, bytesOut, ex);
  }
}

/** The 400 of a session-era request whose MCP-Protocol-Version names no revision the relay speaks. */
function unsupportedVersion(version: string): JsonRpcErrorObject {
  return {
    code: INVALID_REQUEST,
    message: `Bad Request: unsupported MCP-Protocol-Version ${version}; supported: ${SESSION_REVISIONS.join(', ')}`,
  };
}

/** The 413 of a body over 256 KiB (Exchange.readBody sends it, then closes after a bounded lingering read). */
function tooLargeBody() {
  framesTooBig.client.inc();
  return { headers: JSON_HEADERS, body: errorResponse(null, relayError('too_large', 'request body over 256 KiB')) };
}

/**
 * Client notifications go to the phone with the caller context, as requests do
 * (docs/decisions/0006-caller-context.md), except the two the relay acts on itself.
 */
function forwardedToPhone(method: string): boolean {
  return method !== 'notifications/initialized' && method !== 'notifications/cancelled';
}

const COMMA = Buffer.from(',');

function joinBatch(frames: Buffer[]): Buffer {
  const parts: Buffer[] = [Buffer.from('[')];
  frames.forEach((f, i) => parts.push(...(i ? [COMMA, f] : [f])));
  parts.push(Buffer.from(']'));
  return Buffer.concat(parts);
}
