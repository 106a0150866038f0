// /mcp for the session revisions (2025-03-26, 2025-06-18, 2025-11-25): authenticate, bind
// the session, answer what the relay answers itself (initialize, notifications/initialized),
// forward the rest to the phone and bring its answer back to this HTTP exchange.
import { randomBytes } from 'node:crypto';
import type { HttpRequest, HttpResponse, TemplatedApp } from '../uws.ts';
import { BodyTooLarge, Exchange, type AbortTarget, type BodyTarget } from './http.ts';
import { Deadlines, type Timed } from './deadlines.ts';
import type { HttpRequest as Req } from '../uws.ts';
import { limitKey, pickClientAddress } from './client-address.ts';
import { readClientRequest, type ClientRequestBytes } from '../protocol/request-bytes.ts';
import type { LocalRoute } from './router.ts';
import type { Caller, ReplySink } from './device-connection.ts';
import { cachedInitialize, JSON_HEADERS, SLOW_ANSWER_MS, StatelessEndpoint } from './mcp-stateless.ts';
import { storeUnavailable } from './pairing.ts';
import { classifyEra } from '../protocol/stateless.ts';
import { SseStream } from './sse.ts';
import { EventStream, isResponseEvent, newStreamId, postStreamDeadline, SessionChannel } from './session-streams.ts';
import { BusUnavailableError, parseEventId } from '../bus/index.ts';
import { presentedToken, type Credential } from './auth.ts';
import {
  classify,
  errorResponse,
  parseBody,
  resultResponse,
  type JsonRpcId,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts';
import { INVALID_REQUEST, relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import { allowsBatch, isSessionRevision, negotiateRevision, SESSION_REVISIONS } from '../protocol/revisions.ts';
import { MAX_TIMEOUT_MS, requestTimeoutMs } from '../protocol/timeouts.ts';
import { callerContextJson, withCallerContext } from '../protocol/caller.ts';
import { unauthorized } from './unauthorized.ts';
import { insufficientScopeChallenge } from '../protocol/scopes.ts';
import type { Scope } from '../store/types.ts';
import { MAX_FRAME_BYTES } from './device-connection.ts';
import {
  clientAuthFailures,
  framesTooBig,
  methodLabel,
  metrics,
  observeMcpRequest,
  rateLimited,
  sseReplays,
} from '../metrics.ts';
import type { SessionRecord } from '../bus/types.ts';
import { clientInfoOf } from '../protocol/client-info.ts';
import type { GatewayContext } from './context.ts';
import { isRefusal, type CredentialSource, type McpMount, type Refusal } from './features.ts';
import { matchesCredential } from './hub.ts';
import { ExpiringMap } from '../bus/expiring-map.ts';
import { endOnAnswer, tracingOn } from '../observability/tracing.ts';
import {
  answeredSpan,
  exemplarTraceId,
  noteHttpRequest,
  requestLogFields,
  serverSpan,
} from '../observability/relay-spans.ts';

const MCP_HEADERS = [
  'x-api-key',
  'authorization',
  'mcp-session-id',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  'accept',
  'content-type',
  'origin',
  'last-event-id',
  'x-forwarded-for',
] as const;
type McpHeaders = Record<string, string>;
/**
 * Where begin() keeps every X-Forwarded-For value, comma-joined (the chain reads the same:
 * src/gateway/client-address.ts), when proxies are trusted; no real header has a space.
 */
const FORWARDED_CHAIN = 'forwarded chain';
const MCP_HEADER_SET = new Set<string>(MCP_HEADERS);
const PARAM_PREFIX = 'mcp-param-';

// One pass over the request's headers (req.forEach) instead of a native call per name; the
// visitor is shared, its target set just before the pass.
let collecting: McpHeaders;
let collectChain: boolean;
const collectHeader = (k: string, v: string): void => {
  if (MCP_HEADER_SET.has(k)) {
    // Like req.getHeader: the first value, and an empty one is no header.
    if (collecting[k] === undefined && v !== '') collecting[k] = v;
    if (collectChain && k === 'x-forwarded-for')
      collecting[FORWARDED_CHAIN] =
        collecting[FORWARDED_CHAIN] === undefined ? v : `${collecting[FORWARDED_CHAIN]},${v}`;
  } else if (k.startsWith(PARAM_PREFIX)) collecting[k] = v;
};

function collectHeaders(req: Req, trustProxy: boolean): McpHeaders {
  const h: McpHeaders = {};
  collecting = h;
  collectChain = trustProxy;
  req.forEach(collectHeader);
  return h;
}

const RECENT_SESSIONS_MAX = 10_000;
/** How stale the outage fallback's copy of a session served without a bus touch may get. */
const RECENT_REFRESH_MS = 1_000;
/** A resumed POST stream looks for its next events this often (the replay buffer is shared by all nodes). */
const FOLLOW_POLL_MS = 200;
/** Beyond a request's deadline: the origin's grace before it gives up, plus the buffer write. */
const FOLLOW_GRACE_MS = 5_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

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
    explainUnknownKey: (fn) => endpoint.explainers.push(fn),
    offerOAuth: (resourceMetadataUrl) => (endpoint.resourceMetadata = resourceMetadataUrl),
    get oauthOffered() {
      return endpoint.resourceMetadata !== undefined;
    },
  };
}

/** A request on a mounted route (src/gateway/features.ts): its source and what it captured. */
interface Bound {
  source: CredentialSource<unknown>;
  captured: unknown;
}

class McpEndpoint {
  private allowedOriginSet?: Set<string>;
  /** Sessions this node served lately, to keep local phones reachable while the bus is down. */
  private readonly recentSessions = new ExpiringMap<SessionRecord>();
  /** Sessions with SSE streams on this node. */
  private readonly channels = new Map<string, SessionChannel>();
  /** Requests in flight on this node, by session and client id, for notifications/cancelled. */
  private readonly inFlight = new Map<string, (() => void) | FastPost>();

  private readonly stateless: StatelessEndpoint;
  /** Requests on mounted routes, by their copied headers (begin() binds them). */
  private readonly bound = new WeakMap<McpHeaders, Bound>();
  /** Features that can say why /mcp does not know a key (src/gateway/features.ts). */
  readonly explainers: Array<(token: string) => Promise<Refusal | undefined>> = [];
  /** The OAuth discovery document a feature serves for /mcp (McpMount.offerOAuth), if any. */
  resourceMetadata: (() => string) | undefined;

  constructor(private readonly ctx: GatewayContext) {
    this.stateless = new StatelessEndpoint(ctx, (ex, cred, deviceId, msg, related, timeoutMs) =>
      this.forwardTo(ex, cred, deviceId, undefined, msg, related, undefined, timeoutMs),
    );
    // A client's notifications/cancelled may land on another node than its request.
    ctx.router.onClientCancel((sessionId, requestId) =>
      cancelEntry(this.inFlight.get(inFlightKey(sessionId, requestId))),
    );
    // A revoked credential's sessions must not live on in the outage fallback either.
    ctx.hub.onRevoke((match) => {
      for (const [id, { value: s }] of this.recentSessions.values())
        if (matchesCredential(match, { ...s, sessionId: s.id })) this.recentSessions.delete(id);
    });
  }

  /** Built on first use: the public URL is final only once the node listens. */
  private get allowedOrigins(): Set<string> {
    return (this.allowedOriginSet ??= new Set([
      new URL(this.ctx.config.publicUrl).origin,
      ...this.ctx.config.allowedOrigins,
    ]));
  }

  /**
   * With a feature serving OAuth for /mcp (McpMount.offerOAuth), the challenge points OAuth
   * clients at its discovery document (RFC 9728).
   */
  private get challenge(): string {
    return this.resourceMetadata
      ? `Bearer realm="phonebridge", resource_metadata="${this.resourceMetadata()}"`
      : 'Bearer realm="phonebridge"';
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

  private async authenticate(ex: Exchange, h: McpHeaders): Promise<Credential | undefined> {
    let cred: Credential | undefined;
    try {
      const bound = this.bound.get(h);
      const token = presentedToken(h);
      // Known keys are answered from the node's cache, so traffic goes on while Postgres is away.
      const found = bound
        ? await bound.source.resolve(token, bound.captured)
        : ((await this.ctx.auth.authenticate(token)) ?? (token ? await this.explain(token) : undefined));
      if (isRefusal(found)) {
        clientAuthFailures.invalid.inc();
        ex.error(found.status, found.code, found.message);
        return undefined;
      }
      cred = found;
    } catch (err) {
      clientAuthFailures.store_unavailable.inc();
      this.ctx.log.warn({ err: String(err) }, 'auth: store unavailable');
      storeUnavailable(ex);
      return undefined;
    }
    if (!cred) {
      const presented = !!presentedToken(h);
      clientAuthFailures[presented ? 'invalid' : 'missing'].inc();
      const answer = unauthorized(this.challenge, presented, !!this.resourceMetadata);
      ex.send(401, { ...JSON_HEADERS, ...answer.headers }, answer.body);
      return undefined;
    }
    if (cred.account.locked) {
      clientAuthFailures.locked.inc();
      ex.error(402, 'subscription_required', 'the account has no active subscription; pairings and keys are kept');
      return undefined;
    }
    return cred;
  }

  /** The first refusal a feature gives for a key /mcp does not know. */
  private async explain(token: string): Promise<Refusal | undefined> {
    for (const fn of this.explainers) {
      const r = await fn(token);
      if (r) return r;
    }
    return undefined;
  }

  /** The caller's live session, or a 400/404 already sent. */
  private async session(ex: Exchange, h: McpHeaders, cred: Credential): Promise<SessionRecord | undefined> {
    const id = h['mcp-session-id'];
    if (!id) {
      ex.send(
        400,
        JSON_HEADERS,
        errorResponse(null, { code: INVALID_REQUEST, message: 'Bad Request: Mcp-Session-Id header is required' }),
      );
      return undefined;
    }
    const s = await this.touchSession(id);
    // A session belongs to the credential that created it, for the phone it was made for (one
    // fleet key holds sessions with many phones: src/gateway/features.ts); anyone else sees "not found".
    if (!s || s.tokenId !== cred.token.id || s.deviceId !== cred.token.deviceId) {
      ex.send(404, JSON_HEADERS, errorResponse(null, { code: -32001, message: 'Session not found' }));
      return undefined;
    }
    return s;
  }

  /**
   * The shared session, renewed. While the bus is down, a session this node saw recently
   * keeps working for a phone this node holds (nothing else would need the bus); anything
   * else is relay_unavailable.
   */
  private async touchSession(id: string): Promise<SessionRecord | undefined> {
    const leased = this.ctx.bus.sessions.touchNow?.(id, this.ctx.config.sessionIdleMs);
    if (leased) {
      this.noteSession(leased);
      return leased;
    }
    try {
      const s = await this.ctx.bus.sessions.touch(id, this.ctx.config.sessionIdleMs);
      if (s) this.rememberSession(s);
      else this.recentSessions.delete(id);
      return s;
    } catch (err) {
      const recent = this.recentSessions.get(id);
      if (err instanceof BusUnavailableError && recent && this.ctx.hub.device(recent.deviceId)) {
        recent.lastSeenAt = Date.now();
        return recent;
      }
      throw err;
    }
  }

  /** Kept for the session's idle time, and at most RECENT_SESSIONS_MAX (the oldest go first). */
  private rememberSession(s: SessionRecord): void {
    this.recentSessions.delete(s.id);
    this.recentSessions.set(s.id, { ...s }, this.ctx.config.sessionIdleMs);
    if (this.recentSessions.size > RECENT_SESSIONS_MAX) this.recentSessions.delete(this.recentSessions.oldestKey()!);
  }

  /**
   * rememberSession for a session served without a touch of the bus (in-process store, or a
   * lease): the outage fallback is refreshed only once it is RECENT_REFRESH_MS old, not per call.
   */
  private noteSession(s: SessionRecord): void {
    const left = this.recentSessions.remainingMs(s.id);
    if (left === undefined || left < this.ctx.config.sessionIdleMs - RECENT_REFRESH_MS) this.rememberSession(s);
  }

  /** Stops the endpoint's timers (node shutdown). */
  close(): void {
    this.recentSessions.close();
  }

  post(res: HttpResponse, req: HttpRequest, source?: CredentialSource<unknown>): void {
    const begun = this.begin(res, req, source);
    if (!begun) return;
    const { ex, h } = begun;
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
    const deviceId = session.deviceId;
    if (this.ctx.hub.isRevoked({ tokenId: cred.token.id, deviceId, accountId: cred.account.id })) return false;
    const conn = this.ctx.router.readyLocal(deviceId);
    const owner = conn ? undefined : this.ctx.router.knownRemoteOwner(deviceId);
    if (!conn && !owner) return false;
    this.noteSession(session);
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
      call.key = inFlightKey(session.id, req.id);
      this.inFlight.set(call.key, call);
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
    const cred = await this.authenticate(ex, h);
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
          message: `Bad Request: unsupported MCP-Protocol-Version ${versionHeader}; supported: ${SESSION_REVISIONS.join(', ')}`,
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

    const session = await this.session(ex, h, cred);
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

    if (!isBatch && first.kind === 'request')
      return this.answerOne(ex, h, cred, session, first.msg, started, raw.length);

    const answers: Array<Promise<Buffer>> = [];
    for (const item of items) {
      const c = classify(item);
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
    this.rememberSession(session);
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
    if (this.ctx.hub.isRevoked({ tokenId: cred.token.id, deviceId, accountId: cred.account.id })) {
      const e = relayError('cancelled', 'the credential was revoked');
      return Promise.resolve({ frame: Buffer.from(errorResponse(msg.id, e)), refusal: e });
    }
    const traced = tracingOn ? serverSpan(ex, msg, sessionId) : undefined;
    return new Promise((resolve) => {
      let settled = false;
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
      const cred = await this.authenticate(ex, h);
      if (!cred) return;
      const session = await this.session(ex, h, cred);
      if (!session || ex.aborted) return;
      await handle(ex, h, session);
    })().catch((err) => this.fail(ex, err));
  }

  get(res: HttpResponse, req: HttpRequest, source?: CredentialSource<unknown>): void {
    this.withSession(
      res,
      req,
      source,
      (ex, h, session) => this.openStream(ex, h, session),
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

  /** A GET stream: joins (or creates) the session's channel; Last-Event-ID resumes a stream. */
  private async openStream(ex: Exchange, h: McpHeaders, session: SessionRecord): Promise<void> {
    const lastEventId = h['last-event-id'];
    const postDeadline = lastEventId ? postStreamDeadline(parseEventId(lastEventId)?.streamId ?? '') : undefined;
    if (postDeadline !== undefined) return this.resumePostStream(ex, session, lastEventId, postDeadline);
    let channel = this.channels.get(session.id);
    if (!channel || channel.closed) {
      const created = new SessionChannel(
        this.ctx.bus,
        session.id,
        () => {
          if (this.channels.get(session.id) === created) this.channels.delete(session.id);
        },
        { tokenId: session.tokenId, accountId: session.accountId },
        this.ctx.config.budgets.maxStreamsPerSession,
      );
      this.channels.set(session.id, created);
      channel = created;
      created.opening++;
      try {
        await created.join(this.ctx.hub, session.deviceId);
      } catch {
        created.end();
        return ex.send(
          503,
          { ...JSON_HEADERS, 'Retry-After': '1' },
          errorResponse(null, relayError('relay_unavailable')),
        );
      } finally {
        created.opening--;
      }
    }
    // The client left while the channel was joining: a channel nobody listens on must not stay.
    if (ex.aborted) {
      if (channel.idle) channel.end();
      return;
    }
    // Last-Event-ID resumes that stream: what it missed is replayed, then it continues.
    const resume = h['last-event-id'] ? parseEventId(h['last-event-id']) : undefined;
    const stream = new EventStream(
      this.ctx.bus,
      session.id,
      resume?.streamId ?? newStreamId(),
      new SseStream(ex, { 'Mcp-Session-Id': session.id }),
    );
    const sse = stream.sse!;
    sse.onClose(this.ctx.hub.admitStream(session.tokenId, this.ctx.config.budgets.maxStreamsPerKey, sse));
    channel.opening++;
    try {
      if (resume) {
        sseReplays.get.inc();
        const missed = await this.ctx.bus.replayAfter(session.id, h['last-event-id']).catch(() => []);
        for (const e of missed) if (e.data) stream.sse!.send(e.data, e.id);
      } else if (session.revision === '2025-11-25') {
        await stream.prime();
      }
    } finally {
      channel.opening--;
    }
    // Revoked while this GET was on its way (authenticated from the cache just before).
    if (this.ctx.hub.isRevoked(session)) {
      void stream.end();
      if (channel.idle) channel.end();
      return;
    }
    channel.attach(stream);
  }

  /**
   * GET with the Last-Event-ID of a POST stream (the client lost it, or was cut off by a
   * proxy): what that stream carried since, then its answer — followed through the replay
   * buffer, so it works on any node while the call is still running — then the stream ends.
   */
  private async resumePostStream(
    ex: Exchange,
    session: SessionRecord,
    lastEventId: string,
    deadline: number,
  ): Promise<void> {
    sseReplays.post.inc();
    const sse = new SseStream(ex, { 'Mcp-Session-Id': session.id });
    const release = this.ctx.hub.hold({
      deviceId: session.deviceId,
      tokenId: session.tokenId,
      accountId: session.accountId,
      sessionId: session.id,
      end: () => sse.end(),
    });
    sse.onClose(release);
    // Past the request's deadline its answer (a timeout error at worst) is buffered, or gone.
    const until = Math.min(deadline, Date.now() + MAX_TIMEOUT_MS) + FOLLOW_GRACE_MS;
    const { streamId, seq: seen } = parseEventId(lastEventId)!;
    // The first read takes the whole stream: a client holding one of its ids means it has at
    // least one event, so none at all is a stream that never was (or expired): nothing to follow.
    let last = `${streamId}:0`;
    for (let first = true; !sse.closed; first = false) {
      const events = await this.ctx.bus.replayAfter(session.id, last).catch(() => undefined);
      if (events === undefined) break; // the bus is away: end the stream, the client retries
      if (first && events.length === 0) break;
      for (const e of events) {
        last = e.id;
        if (!e.data || parseEventId(e.id)!.seq <= seen) continue;
        sse.send(e.data, e.id);
        if (isResponseEvent(e.data)) return sse.end();
      }
      if (Date.now() >= until) break;
      await sleep(FOLLOW_POLL_MS);
    }
    sse.end();
  }

  delete(res: HttpResponse, req: HttpRequest, source?: CredentialSource<unknown>): void {
    this.withSession(res, req, source, async (ex, _h, session) => {
      await this.ctx.bus.sessions.delete(session.id);
      this.recentSessions.delete(session.id);
      // Every node drops its lease on the session (docs/decisions/0133-session-leases.md) and
      // ends its streams; awaited, so the session is refused everywhere once the client hears back.
      await this.ctx.bus.publishControl({ type: 'sessions_ended', sessionIds: [session.id] }).catch(() => {});
      this.channels.get(session.id)?.end();
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

function cancelEntry(e: (() => void) | FastPost | undefined): void {
  if (typeof e === 'function') e();
  else e?.cancel();
}

/** A cached credential's caller, made once: the auth cache replaces the credential when it changes. */
const fastCallers = new WeakMap<Credential, Caller>();

/** FastPosts that may still open an SSE stream: their answer is slow (SLOW_ANSWER_MS). */
const slowAnswers = new Deadlines<FastPost>((call) => {
  if (!call.ex.aborted) call.open();
});

/**
 * One POST on McpEndpoint.fastPost's path, from the body to the answer: the body's target,
 * the router's sink, the exchange's abort target and the in-flight entry, so a call creates
 * this object and its route, not a closure for each role. It behaves as answerOne does for a
 * request without a progress token.
 */
class FastPost implements BodyTarget, ReplySink, AbortTarget, Timed {
  readonly started = performance.now();
  dueAt = 0;
  prevDue: Timed | undefined = undefined;
  nextDue: Timed | undefined = undefined;
  dueList: object | undefined = undefined;
  session?: SessionRecord;
  route?: LocalRoute;
  key?: string;
  timeoutMs = 0;
  private stream?: EventStream;
  private method = '';
  private id: JsonRpcId = 0;
  private bytesIn = 0;

  constructor(
    private readonly endpoint: McpEndpoint,
    readonly ex: Exchange,
    readonly h: McpHeaders,
    readonly cred: Credential,
  ) {}

  bodyRead(body: Buffer): void {
    if (this.ex.aborted) return;
    let taken = false;
    try {
      taken = this.endpoint.fastPost(this, body);
    } catch (err) {
      // Once started the request may have reached the phone: it must not be sent again.
      if (this.session) return this.endpoint.failPost(this.ex, err);
    }
    if (!taken) this.endpoint.slowPost(this.ex, this.h, body);
  }

  bodyFailed(): void {
    // BodyTooLarge: Exchange.readBody has answered 413 already.
  }

  caller(): Caller {
    let c = fastCallers.get(this.cred);
    if (!c) {
      const t = this.cred.token;
      fastCallers.set(
        this.cred,
        (c = Object.freeze({ scopes: t.scopes, tokenId: t.id, accountId: this.cred.account.id })),
      );
    }
    return c;
  }

  start(session: SessionRecord, req: ClientRequestBytes, bytesIn: number): void {
    this.session = session;
    this.method = req.method;
    this.id = req.id;
    this.bytesIn = bytesIn;
    if ((this.h.accept ?? '').includes('text/event-stream')) slowAnswers.start(this, SLOW_ANSWER_MS);
  }

  open(): EventStream {
    return (this.stream ??= this.endpoint.openPostStream(this));
  }

  respond(frame: Buffer): void {
    this.answer(frame, undefined);
  }

  related(frame: Buffer): void {
    void this.open().send(frame);
  }

  fail(error: JsonRpcErrorObject): void {
    this.answer(Buffer.from(errorResponse(this.id, error)), error);
  }

  /** The client's notifications/cancelled (this node, or relayed by another). */
  cancel(): void {
    if (this.route) this.endpoint.cancelRoute(this.route);
  }

  /** Session revisions: a disconnect is not a cancellation; the call runs on as an orphan unless a GET can resume it. */
  exchangeAborted(): void {
    if (this.stream === undefined && this.route) this.endpoint.orphanRoute(this.route);
  }

  private answer(frame: Buffer, refusal: JsonRpcErrorObject | undefined): void {
    slowAnswers.cancel(this);
    this.endpoint.settled(this);
    const ex = this.ex;
    if (refusal?.data && (refusal.data as { code?: string }).code === 'insufficient_scope' && !this.stream) {
      const scope = (refusal.data as { scope: Scope }).scope;
      ex.send(403, { ...JSON_HEADERS, 'WWW-Authenticate': insufficientScopeChallenge(scope) }, frame);
      this.endpoint.observe(this.method, this.started, this.bytesIn, frame.length, 'forbidden');
      return;
    }
    const outcome = refusal ? 'error' : 'ok';
    if (this.stream) {
      const s = this.stream;
      void s.send(frame);
      void s
        .end()
        .then(() =>
          this.endpoint.observe(
            this.method,
            this.started,
            this.bytesIn,
            frame.length,
            ex.aborted ? 'aborted' : outcome,
          ),
        );
      return;
    }
    ex.send(200, JSON_HEADERS, frame);
    this.endpoint.observe(this.method, this.started, this.bytesIn, frame.length, ex.aborted ? 'aborted' : outcome);
  }
}

const COMMA = Buffer.from(',');

function joinBatch(frames: Buffer[]): Buffer {
  const parts: Buffer[] = [Buffer.from('[')];
  frames.forEach((f, i) => parts.push(...(i ? [COMMA, f] : [f])));
  parts.push(Buffer.from(']'));
  return Buffer.concat(parts);
}

function inFlightKey(sessionId: string, id: JsonRpcId): string {
  return `${sessionId}\u0000${typeof id}:${id}`;
}
