// /mcp for the session revisions (2025-03-26, 2025-06-18, 2025-11-25): authenticate, bind
// the session, answer what the relay answers itself (initialize, notifications/initialized),
// forward the rest to the phone and bring its answer back to this HTTP exchange.
import { randomBytes } from 'node:crypto';
import type { HttpRequest, HttpResponse, TemplatedApp } from '../uws.ts';
import { BodyTooLarge, Exchange } from './http.ts';
import { collectHeaders, FORWARDED_CHAIN, type McpHeaders } from './mcp-headers.ts';
import { cancelEntry, FastPost, inFlightKey, type FastPostHost } from './fast-post.ts';
import { GetStreams } from './get-streams.ts';
import { SessionLookup } from './session-lookup.ts';
import { ClientAuth, type Bound } from './client-auth.ts';
import { limitKey, pickClientAddress } from './client-address.ts';
import { readClientRequest } from '../protocol/request-bytes.ts';
import { postMediaRefusal } from '../protocol/media-types.ts';
import type { LocalRoute } from './route.ts';
import { cachedInitialize, JSON_HEADERS, SLOW_ANSWER_MS, StatelessEndpoint } from './mcp-stateless.ts';
import { classifyEra } from '../protocol/stateless.ts';
import { SseStream } from './sse.ts';
import { EventStream, newStreamId } from './session-streams.ts';
import { BusUnavailableError } from '../bus/index.ts';
import { presentedToken, type Credential } from './auth.ts';
import {
  classify,
  classifyClientMessage,
  duplicateRequestId,
  errorResponse,
  parseBody,
  resultResponse,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts';
import { INVALID_REQUEST, relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import {
  allowsBatch,
  isSessionRevision,
  negotiateRevision,
  SESSION_REVISIONS,
  STATELESS_REVISIONS,
} from '../protocol/revisions.ts';
import { requestTimeoutMs } from '../protocol/timeouts.ts';
import { callerContextJson, withCallerContext } from '../protocol/caller.ts';
import { insufficientScopeChallenge } from '../protocol/scopes.ts';
import type { Scope } from '../store/types.ts';
import { MAX_FRAME_BYTES } from './device-connection.ts';
import { framesTooBig, methodLabel, metrics, observeMcpRequest, rateLimited } from '../metrics.ts';
import type { SessionRecord } from '../bus/types.ts';
import { clientInfoOf } from '../protocol/client-info.ts';
import type { GatewayContext } from './context.ts';
import type { CredentialSource, McpMount } from './features.ts';
import { endOnAnswer, tracingOn } from '../observability/tracing.ts';
import {
  answeredSpan,
  exemplarTraceId,
  noteHttpRequest,
  requestLogFields,
  serverSpan,
} from '../observability/relay-spans.ts';

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

class McpEndpoint implements FastPostHost {
  private allowedOriginSet?: Set<string>;
  private readonly sessions: SessionLookup;
  /** Who is calling: keys, mounted routes' sources, features' explanations. */
  readonly clientAuth: ClientAuth;
  /** GET streams of this node's sessions. */
  private readonly getStreams: GetStreams;
  /** Requests in flight on this node, by session and client id, for notifications/cancelled. */
  private readonly inFlight = new Map<string, (() => void) | FastPost>();

  private readonly stateless: StatelessEndpoint;
  /** Requests on mounted routes, by their copied headers (begin() binds them). */
  private readonly bound = new WeakMap<McpHeaders, Bound>();

  constructor(private readonly ctx: GatewayContext) {
    this.getStreams = new GetStreams(ctx);
    this.sessions = new SessionLookup(ctx);
    this.clientAuth = new ClientAuth(ctx);
    this.stateless = new StatelessEndpoint(ctx, (ex, cred, deviceId, msg, related, timeoutMs) =>
      this.forwardTo(ex, cred, deviceId, undefined, msg, related, undefined, timeoutMs),
    );
    // A client's notifications/cancelled may land on another node than its request.
    ctx.router.onClientCancel((sessionId, requestId) =>
      cancelEntry(this.inFlight.get(inFlightKey(sessionId, requestId))),
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
    source?: CredentialSource<unknown>,
  ): { ex: Exchange; h: McpHeaders } | undefined {
    const ex = new Exchange(res);
    const h = collectHeaders(req, this.ctx.config.trustProxy);
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
    const begun = this.begin(res, req, source);
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
    const cred = source ? undefined : this.ctx.auth.cached(presentedToken(h));
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
    const req = readClientRequest(raw);
    if (!req || req.method === 'initialize' || this.ctx.config.budgets.maxBatch < 1) return false;
    // The in-process store, or this node's lease on a Redis session
    // (docs/decisions/0133-session-leases.md); undefined sends it to the general path, which asks the bus.
    const session = this.ctx.bus.sessions.touchNow!(h['mcp-session-id'], this.ctx.config.sessionIdleMs);
    if (!session || session.tokenId !== cred.token.id) return false;
    // Its id is in use in the session: the general path refuses it (forwardTo).
    const key = inFlightKey(session.id, req.id);
    if (this.inFlight.has(key)) return false;
    const deviceId = session.deviceId;
    if (this.ctx.hub.isRevoked({ tokenId: cred.token.id, deviceId, accountId: cred.account.id })) return false;
    const conn = this.ctx.router.readyLocal(deviceId);
    const owner = conn ? undefined : this.ctx.router.knownRemoteOwner(deviceId);
    if (!conn && !owner) return false;
    this.sessions.note(session);
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
      ? this.ctx.router.startLocal(conn, req, callerJson, call.caller(), call, timeoutMs)
      : this.ctx.router.startRemote(deviceId, owner!, req, callerJson, call.caller(), call, timeoutMs);
    if (!route.done) {
      call.route = route;
      call.key = key;
      this.inFlight.set(key, call);
      call.ex.onAbort(call);
    }
    return true;
  }

  /** A FastPost's request is answered (or failed): no longer cancellable by the client. */
  settled(call: FastPost): void {
    if (call.key !== undefined) this.inFlight.delete(call.key);
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
    const parsed = parseBody(raw.toString('utf8'));
    if (!parsed.ok) return ex.send(400, JSON_HEADERS, errorResponse(null, parsed.error));
    if (classifyEra(h, parsed.value) === 'stateless') return this.stateless.post(ex, h, cred, parsed.value, started);
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
        errorResponse(null, {
          code: INVALID_REQUEST,
          // A served stateless revision reaches here only with a session-era body (classifyEra).
          message: (STATELESS_REVISIONS as readonly string[]).includes(versionHeader)
            ? `Bad Request: MCP-Protocol-Version ${versionHeader} has no sessions, batches or initialize: send each request on its own, without Mcp-Session-Id, its revision in params._meta (session revisions: ${SESSION_REVISIONS.join(', ')})`
            : `Bad Request: unsupported MCP-Protocol-Version ${versionHeader}; supported: ${SESSION_REVISIONS.join(', ')}`,
        }),
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
      return this.initialize(ex, h, cred, first.msg, started, raw.length);
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
      return this.answerOne(ex, h, cred, session, first.msg, started, raw.length);
    }

    const answers: Array<Promise<Buffer>> = [];
    for (const item of items) {
      const c = classifyClientMessage(item);
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
        else answers.push(this.forward(ex, cred, session, c.msg).then((o) => o.frame));
      } else if (c.kind === 'notification') {
        this.clientNotification(session, c.msg.method, c.msg.params);
      }
      // Responses from the client answer nothing: the relay never forwards phone requests.
    }
    if (answers.length === 0) return ex.send(202, {}, undefined);
    const out = joinBatch(await Promise.all(answers));
    ex.send(200, JSON_HEADERS, out);
    this.observe('batch', started, raw.length, out.length, ex.aborted ? 'aborted' : 'ok', ex);
  }

  /**
   * One request, one POST. JSON when the answer is ready within SLOW_ANSWER_MS; otherwise,
   * when the client accepts it, an SSE stream (keep-alives so idle proxies do not cut a long
   * call, event ids so a dropped one resumes). A request carrying a progress token is always
   * an SSE stream (its progress travels on it only,
   * docs/decisions/0007-what-the-relay-rewrites.md). A call outside the
   * credential's scopes is a 403 with the scope challenge.
   */
  private async answerOne(
    ex: Exchange,
    h: McpHeaders,
    cred: Credential,
    session: SessionRecord,
    msg: JsonRpcRequest,
    started: number,
    bytesIn: number,
  ): Promise<void> {
    const meta = msg.params?._meta as Record<string, unknown> | undefined;
    const sseOk = (h.accept ?? '').includes('text/event-stream');
    const streamed = meta?.progressToken !== undefined && sseOk;
    // The stream opens on the first progress or related message, or once the answer is slow;
    // a refusal decided before that can still be a plain 403.
    let stream: EventStream | undefined;
    const open = () => {
      if (stream) return stream;
      stream = new EventStream(
        this.ctx.bus,
        session.id,
        newStreamId({
          deadline: Date.now() + requestTimeoutMs(msg.method, msg.params, this.ctx.config.requestTimeoutMs),
        }),
        new SseStream(ex, {}),
      );
      if (session.revision === '2025-11-25') void stream.prime();
      return stream;
    };
    const early = sseOk ? setTimeout(() => ex.aborted || open(), SLOW_ANSWER_MS) : undefined;
    const outcome = await this.forward(
      ex,
      cred,
      session,
      msg,
      (frame) => void open().send(frame),
      () => stream !== undefined,
    );
    clearTimeout(early);
    // The relay's own -32600: the id is in use by a request in flight (forwardTo).
    if (outcome.refusal?.code === INVALID_REQUEST && !stream) {
      ex.send(400, JSON_HEADERS, outcome.frame);
      this.observe(msg.method, started, bytesIn, outcome.frame.length, 'error', ex);
      return;
    }
    if (outcome.refusal?.data && (outcome.refusal.data as { code?: string }).code === 'insufficient_scope' && !stream) {
      const scope = (outcome.refusal.data as { scope: Scope }).scope;
      ex.send(403, { ...JSON_HEADERS, 'WWW-Authenticate': insufficientScopeChallenge(scope) }, outcome.frame);
      this.observe(msg.method, started, bytesIn, outcome.frame.length, 'forbidden', ex);
      return;
    }
    // A client gone before its stream opened never learnt the stream's id: nothing to buffer for.
    if (stream || (streamed && !ex.aborted)) {
      const s = open();
      void s.send(outcome.frame);
      await s.end();
    } else {
      ex.send(200, JSON_HEADERS, outcome.frame);
    }
    this.observe(
      msg.method,
      started,
      bytesIn,
      outcome.frame.length,
      ex.aborted ? 'aborted' : outcome.refusal ? 'error' : 'ok',
      ex,
    );
  }

  private async initialize(
    ex: Exchange,
    h: McpHeaders,
    cred: Credential,
    msg: JsonRpcRequest,
    started: number,
    bytesIn: number,
  ): Promise<void> {
    const { initializePerMinute, initializePerMinutePerAddress, maxSessionsPerKey } = this.ctx.config.budgets;
    if (ex.aborted) return; // the client's address is read from its response, valid until it goes
    // Keyed here, not per call: only initialize counts per address.
    const chain = h[FORWARDED_CHAIN];
    const address = limitKey(
      pickClientAddress(
        Buffer.from(ex.res.getRemoteAddressAsText()).toString(),
        chain === undefined ? [] : [chain],
        this.ctx.config,
      ),
    );
    // Counted on the bus, so the limits hold across nodes; the key's first, then the address's.
    const [byKey, byAddress] = await Promise.all([
      this.ctx.bus.hit(`init:k:${cred.token.id}`, 60_000),
      this.ctx.bus.hit(`init:a:${address}`, 60_000),
    ]);
    if (byKey > initializePerMinute || byAddress > initializePerMinutePerAddress) {
      rateLimited[byKey > initializePerMinute ? 'initialize_per_key' : 'initialize_per_address'].inc();
      const who = byKey > initializePerMinute ? 'this key' : 'this address';
      return ex.send(
        429,
        { ...JSON_HEADERS, 'Retry-After': '60' },
        errorResponse(msg.id, {
          code: INVALID_REQUEST,
          message: `Too many sessions created by ${who} in the last minute; reuse a session or retry later`,
        }),
      );
    }
    const revision = negotiateRevision(msg.params?.protocolVersion);
    const deviceId = cred.token.deviceId;
    const cached = await cachedInitialize(this.ctx, deviceId, true);
    const now = Date.now();
    const client = clientInfoOf(msg.params);
    const session: SessionRecord = {
      id: randomBytes(18).toString('base64url'),
      tokenId: cred.token.id,
      deviceId,
      accountId: cred.account.id,
      revision,
      scopes: cred.token.scopes,
      createdAt: now,
      lastSeenAt: now,
      ...(client ? { client } : {}),
    };
    const evicted = await this.ctx.bus.sessions.create(session, this.ctx.config.sessionIdleMs, maxSessionsPerKey);
    // The key's least recently used sessions beyond its cap are gone: so are their streams, on every node.
    // Awaited: once the client has its new session, the evicted ones are refused on every node
    // (their leases there end on this broadcast: docs/decisions/0133-session-leases.md).
    if (evicted.length > 0)
      await this.ctx.bus.publishControl({ type: 'sessions_ended', sessionIds: evicted }).catch(() => {});
    this.sessions.remember(session);
    metrics.sessionsCreated.inc();
    const out = resultResponse(msg.id, { ...cached, protocolVersion: revision });
    if (tracingOn) answeredSpan(ex, msg, session.id, started);
    ex.send(200, { ...JSON_HEADERS, 'Mcp-Session-Id': session.id }, out);
    this.observe('initialize', started, bytesIn, out.length, 'ok', ex);
  }

  /** Sends one request to the phone, wherever it is; resolves with the answer (client id restored). */
  private forward(
    ex: Exchange,
    cred: Credential,
    session: SessionRecord,
    msg: JsonRpcRequest,
    related?: (frame: Buffer) => void,
    resumable?: () => boolean,
  ): Promise<{ frame: Buffer; refusal?: JsonRpcErrorObject }> {
    return this.forwardTo(ex, cred, session.deviceId, session.id, msg, related, resumable);
  }

  /** `sessionId` undefined (2026-07-28): closing the response is the only way to cancel the request. */
  private forwardTo(
    ex: Exchange,
    cred: Credential,
    deviceId: string,
    sessionId: string | undefined,
    msg: JsonRpcRequest,
    related?: (frame: Buffer) => void,
    /** Whether a GET could still resume the answer once the client is gone (its SSE stream opened). */
    resumable?: () => boolean,
    /** Sized from a tool header (docs/decisions/0181-tool-headers.md); else from the body. */
    headerTimeoutMs?: number,
  ): Promise<{ frame: Buffer; refusal?: JsonRpcErrorObject }> {
    const key = sessionId === undefined ? undefined : inFlightKey(sessionId, msg.id);
    if (key !== undefined && this.inFlight.has(key)) {
      // Ids are unique within a session; the first request keeps the id, and its cancellation
      // (docs/decisions/0216-duplicate-request-ids.md).
      const e = duplicateRequestId(msg.id);
      return Promise.resolve({ frame: Buffer.from(errorResponse(msg.id, e)), refusal: e });
    }
    if (this.ctx.hub.isRevoked({ tokenId: cred.token.id, deviceId, accountId: cred.account.id })) {
      const e = relayError('cancelled', 'the credential was revoked');
      return Promise.resolve({ frame: Buffer.from(errorResponse(msg.id, e)), refusal: e });
    }
    const traced = tracingOn ? serverSpan(ex, msg, sessionId) : undefined;
    return new Promise((resolve) => {
      let settled = false;
      // The id is taken from now on (a request with the same id is refused above); a
      // notifications/cancelled before the router's handle exists cancels once it does.
      let cancelled = false;
      if (key !== undefined) this.inFlight.set(key, () => (cancelled = true));
      const settle = (o: { frame: Buffer; refusal?: JsonRpcErrorObject }) => {
        settled = true;
        if (key !== undefined) this.inFlight.delete(key);
        resolve(o);
      };
      let sink = {
        respond: (frame: Buffer) => settle({ frame }),
        related,
        fail: (e: JsonRpcErrorObject) => settle({ frame: Buffer.from(errorResponse(msg.id, e)), refusal: e }),
      };
      if (traced) sink = endOnAnswer(sink, traced.span);
      const timeoutMs = headerTimeoutMs ?? requestTimeoutMs(msg.method, msg.params, this.ctx.config.requestTimeoutMs);
      void this.ctx.router
        .request(
          deviceId,
          msg,
          withCallerContext(msg.params, cred.token),
          { scopes: cred.token.scopes, tokenId: cred.token.id, accountId: cred.account.id, trace: traced?.ctx },
          sink,
          timeoutMs,
        )
        .then((handle) => {
          if (settled) return;
          if (key !== undefined) this.inFlight.set(key, handle);
          if (cancelled) return handle();
          // 2026-07-28: closing the response cancels the request, and the phone is told. Session
          // revisions: "disconnection SHOULD NOT be interpreted as the client cancelling its
          // request" — it runs to its end (its timeout bounds it), a streamed answer still reaches
          // the replay buffer, and the client's notifications/cancelled still cancels it. A call
          // no GET can resume (its stream never opened) is an orphan: it stops counting against
          // its key and is bounded per phone (docs/decisions/0042-abandoned-calls.md).
          if (sessionId === undefined) ex.onAbort(handle);
          else ex.onAbort(() => resumable?.() || handle.orphan?.());
        });
    });
  }

  private clientNotification(
    session: SessionRecord,
    method: string,
    params: Record<string, unknown> | undefined,
  ): void {
    if (method === 'notifications/initialized') return; // swallowed: the relay initialized the phone itself
    if (method === 'notifications/cancelled') {
      const requestId = params?.requestId;
      if (typeof requestId !== 'string' && typeof requestId !== 'number') return;
      const cancel = this.inFlight.get(inFlightKey(session.id, requestId));
      if (cancel) cancelEntry(cancel);
      else void this.ctx.router.broadcastCancel(session.id, requestId); // the request is on another node
      return;
    }
    // As on requests (docs/decisions/0006-caller-context.md): the phone learns who sent it, and a client cannot say otherwise.
    void this.ctx.router.notify(
      session.deviceId,
      method,
      withCallerContext(params, { id: session.tokenId, scopes: session.scopes }),
    );
  }

  /** GET and DELETE: session revisions only; authenticated, with a live session of the caller. */
  private withSession(
    res: HttpResponse,
    req: HttpRequest,
    source: CredentialSource<unknown> | undefined,
    handle: (ex: Exchange, h: McpHeaders, session: SessionRecord) => Promise<void>,
    check?: (ex: Exchange, h: McpHeaders) => boolean,
  ): void {
    const begun = this.begin(res, req, source);
    if (!begun) return;
    const { ex, h } = begun;
    if (classifyEra(h, undefined) === 'stateless') return this.statelessMethodNotAllowed(ex);
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
    if (this.ctx.log.isLevelEnabled('debug'))
      this.ctx.log.debug(
        {
          method: methodLabel(method),
          bytesIn,
          bytesOut,
          ms: Math.round(seconds * 10000) / 10,
          ...(tracingOn && ex && requestLogFields(ex)),
        },
        'mcp request',
      );
  }
}

/** The 413 of a body over 256 KiB (Exchange.readBody sends it, then closes after a bounded lingering read). */
function tooLargeBody() {
  framesTooBig.client.inc();
  return { headers: JSON_HEADERS, body: errorResponse(null, relayError('too_large', 'request body over 256 KiB')) };
}

const COMMA = Buffer.from(',');

function joinBatch(frames: Buffer[]): Buffer {
  const parts: Buffer[] = [Buffer.from('[')];
  frames.forEach((f, i) => parts.push(...(i ? [COMMA, f] : [f])));
  parts.push(Buffer.from(']'));
  return Buffer.concat(parts);
}
