// /mcp for revision 2026-07-28: no session, no initialize, every request carries its own
// version and client info in _meta and mirrors method/name into headers. The relay answers
// server/discover from the phone's cached initialize result, serves subscriptions/listen
// from the phone's notifications, and forwards the rest, finishing each result with the
// fields this revision requires. Closing a response stream cancels the request.
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import { preEncoded, type Exchange } from './http.ts';
import { SseStream } from './sse.ts';
import type { Credential } from './auth.ts';
import type { Listener } from './hub.ts';
import type { GatewayContext } from './context.ts';
import { classifyClientMessage, errorResponse, resultResponse, type JsonRpcRequest } from '../protocol/jsonrpc.ts';
import { INVALID_REQUEST, METHOD_NOT_FOUND, relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import { paramHeaders, provisionalTimeoutMs } from './tool-header-check.ts';
import { insufficientScopeChallenge } from '../protocol/scopes.ts';
import {
  acknowledgeSubscription,
  checkTaskMethod,
  discoverResult,
  finishStatelessResultFrame,
  honouredFilter,
  listenNotAcceptable,
  parseSubscriptionFilter,
  subscriptionClosedResult,
  subscriptionNotification,
  validateStatelessRequest,
  withoutLegacyTask,
  HEADER_MISMATCH,
  MISSING_REQUIRED_CLIENT_CAPABILITY,
  SUPPORTED_VERSIONS,
} from '../protocol/stateless.ts';
import { validateParamHeaders } from '../protocol/tool-headers.ts';
import { headerTimeoutMs } from '../protocol/timeouts.ts';
import type { Scope } from '../store/types.ts';
import { initializeFrom, observeMcpRequest } from '../metrics.ts';
import { tracingOn } from '../observability/tracing.ts';
import { answeredSpan } from '../observability/relay-spans.ts';
import { parseJson, stringifyJson } from '../protocol/exact-json.ts';
import { RequestLog } from './request-log.ts';

/** A POST not answered within this long becomes an SSE stream (if the client accepts one). */
export const SLOW_ANSWER_MS = 1000;

export const JSON_HEADERS = preEncoded({ 'Content-Type': 'application/json' });

/** What a client sees before its phone ever connected: enough to connect and learn it is offline. */
const FALLBACK_INIT = {
  capabilities: { tools: { listChanged: true } },
  serverInfo: { name: 'phonebridge-device', version: '0.0.0' },
};

/**
 * The phone's initialize result: from its live socket, else the store's cache, else the
 * fallback. `answer`: the relay answers initialize or server/discover with it (counted by source).
 */
export async function cachedInitialize(
  ctx: GatewayContext,
  deviceId: string,
  answer = false,
): Promise<Record<string, unknown>> {
  const live = ctx.hub.device(deviceId)?.initResult;
  const init = live ?? (await ctx.store.getDevice(deviceId))?.initResult;
  if (answer) initializeFrom[live ? 'socket' : init ? 'store' : 'fallback'].inc();
  return (init as Record<string, unknown> | undefined) ?? FALLBACK_INIT;
}

export type ForwardOutcome = { frame: Buffer; refusal?: JsonRpcErrorObject };
export type Forward = (
  ex: Exchange,
  cred: Credential,
  deviceId: string,
  msg: JsonRpcRequest,
  related?: (frame: Buffer) => void,
  /** The call's own timeout when a tool header sized it (headerTimeoutMs); else the body decides. */
  timeoutMs?: number,
  /** A tools/call's `Mcp-Param-*` headers, when this node could not check them (Caller.toolHeaders). */
  toolHeaders?: Record<string, string>,
) => Promise<ForwardOutcome>;

export class StatelessEndpoint {
  private readonly requestLog: RequestLog;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly forward: Forward,
  ) {
    this.requestLog = new RequestLog(ctx.log);
  }

  /**
   * `started`: when the request arrived (performance.now()), for its latency; `bytesIn`: its
   * body's size, for the debug line.
   */
  async post(
    ex: Exchange,
    h: Record<string, string>,
    cred: Credential,
    body: unknown,
    started = performance.now(),
    bytesIn?: number,
  ): Promise<void> {
    const c = classifyClientMessage(body);
    if (c.kind === 'notification') return ex.send(202, {}, undefined); // none defined on HTTP in this revision
    if (c.kind === 'response')
      return ex.send(
        400,
        JSON_HEADERS,
        errorResponse(null, {
          code: INVALID_REQUEST,
          message: 'Invalid Request: clients send no responses in 2026-07-28',
        }),
      );
    if (c.kind === 'invalid') return ex.send(400, JSON_HEADERS, errorResponse(c.id, c.error));
    const msg = c.msg;
    const checked = validateStatelessRequest(h, msg);
    if (!checked.ok) return ex.send(checked.status, JSON_HEADERS, errorResponse(msg.id, checked.error));
    const deviceId = cred.token.deviceId;

    if (msg.method === 'server/discover') {
      if (tracingOn) answeredSpan(ex, msg, undefined);
      // A dual-era relay: every version it speaks, so -32022's list is a subset of this one.
      const out = resultResponse(
        msg.id,
        discoverResult(await cachedInitialize(this.ctx, deviceId, true), { supportedVersions: SUPPORTED_VERSIONS }),
      );
      ex.send(200, JSON_HEADERS, out);
      return this.observed(ex, msg.method, started, ex.aborted ? 'aborted' : 'ok', bytesIn, Buffer.byteLength(out));
    }
    if (msg.method === 'subscriptions/listen') return this.listen(ex, h, cred, msg);

    // The tasks extension (docs/decisions/0183-tasks-extension.md): its methods need the phone to
    // offer it and the client to declare it; a tools/call loses the member this revision removed.
    const init = await cachedInitialize(this.ctx, deviceId);
    const tasks = checkTaskMethod(msg.method, checked.info.meta, init.capabilities);
    if (!tasks.ok) return ex.send(tasks.status, JSON_HEADERS, errorResponse(msg.id, tasks.error));
    if (msg.method === 'tools/call') msg.params = withoutLegacyTask(msg.params);

    let timeoutMs: number | undefined;
    let toolHeaders: Record<string, string> | undefined;
    if (msg.method === 'tools/call') {
      // Mcp-Param-* headers must match the arguments they mirror, checked against the tool's
      // declarations here when this node has the phone's catalog; otherwise they travel with the
      // request and are checked, and size the call, where it starts on the phone
      // (src/gateway/tool-header-check.ts): the same answer from every node.
      const tool = this.ctx.hub.device(deviceId)?.tools?.byName.get(String(msg.params?.name));
      if (tool) {
        const p = validateParamHeaders(tool.inputSchema, h, msg.params?.arguments);
        if (!p.ok) return ex.send(p.status, JSON_HEADERS, errorResponse(msg.id, p.error));
        timeoutMs = headerTimeoutMs(tool.inputSchema, h);
      } else {
        toolHeaders = paramHeaders(h);
        timeoutMs = provisionalTimeoutMs(h, msg.method, msg.params, this.ctx.config.requestTimeoutMs);
      }
    }

    const serverInfo = init.serverInfo;
    const finish = (frame: Buffer) =>
      finishStatelessResultFrame(msg.method, frame, { serverInfo, forcePrivate: msg.method === 'tools/list' });
    const meta = msg.params?._meta as Record<string, unknown> | undefined;
    const sseOk = (h.accept ?? '').includes('text/event-stream');
    const wantsStream = meta?.progressToken !== undefined && sseOk;
    let stream: SseStream | undefined;
    const open = () => (stream ??= new SseStream(ex, {}));
    // As on the session path: a slow answer becomes a stream so keep-alives flow.
    const early = sseOk ? setTimeout(() => ex.aborted || open(), SLOW_ANSWER_MS) : undefined;
    // JSON only without text/event-stream in Accept: progress is dropped (docs/decisions/0215-post-media-types.md).
    const related = sseOk ? (frame: Buffer) => void open().send(frame) : undefined;
    const outcome = await this.forward(ex, cred, deviceId, msg, related, timeoutMs, toolHeaders);
    clearTimeout(early);
    const refusal = outcome.refusal?.data as { code?: string; scope?: Scope } | undefined;
    const forbidden = refusal?.code === 'insufficient_scope' && !stream;
    // What goes back, whichever way below: a refusal as the phone's node made it.
    const frame = outcome.refusal ? outcome.frame : finish(outcome.frame);
    this.observed(
      ex,
      msg.method,
      started,
      ex.aborted ? 'aborted' : forbidden ? 'forbidden' : outcome.refusal ? 'error' : 'ok',
      bytesIn,
      frame.length,
    );
    if (forbidden) {
      return ex.send(
        403,
        { ...JSON_HEADERS, 'WWW-Authenticate': insufficientScopeChallenge(refusal.scope!) },
        outcome.frame,
      );
    }
    if (outcome.refusal?.code === METHOD_NOT_FOUND && !stream) return ex.send(404, JSON_HEADERS, outcome.frame);
    // A tool header refused where the phone is (tool-header-check.ts): 400, as if refused here. A
    // stream already open (no verdict within SLOW_ANSWER_MS: the phone was moving or starting)
    // has sent its 200: the refusal is then its one message.
    if (outcome.refusal?.code === HEADER_MISMATCH && !stream) return ex.send(400, JSON_HEADERS, outcome.frame);
    if (stream || wantsStream) {
      const s = open();
      s.send(frame);
      s.end();
    } else {
      ex.send(missingCapability(frame) ? 400 : 200, JSON_HEADERS, frame);
    }
  }

  /**
   * One answered request of this era: phonebridge_mcp_requests_total and, at debug, its
   * `mcp request` line with the session era's fields (McpEndpoint.observe): sizes, latency and
   * the method's metric label, never content.
   */
  private observed(
    ex: Exchange,
    method: string,
    started: number,
    outcome: string,
    bytesIn: number | undefined,
    bytesOut: number,
  ): void {
    const seconds = (performance.now() - started) / 1000;
    observeMcpRequest(method, outcome, seconds, 'stateless');
    this.requestLog.write(method, seconds, bytesIn, bytesOut, ex);
  }

  /**
   * subscriptions/listen: an SSE stream of the change notifications the client opted in to.
   *
   * The acknowledgment is its first message (spec basic/patterns/subscriptions): the stream is
   * registered with the hub before the node hears the device's channel, so what the phone sends
   * from then on is held (filtered and tagged) until the acknowledgment is written, then written
   * after it in order. The status line goes out with the acknowledgment, once the node hears the
   * channel: as a GET's 200 (get-streams.ts), it does not show the stream open before whatever
   * the phone sends reaches it. A stream the relay ends itself (drain, the key's stream budget,
   * revocation, removal) gets the listen request's result last: a graceful end, not a drop.
   */
  private async listen(ex: Exchange, h: Record<string, string>, cred: Credential, msg: JsonRpcRequest): Promise<void> {
    // Only ever a stream: a client that lists only JSON gets the refusal GET /mcp gets (0215).
    const notAcceptable = listenNotAcceptable(h.accept);
    if (notAcceptable) return ex.send(406, JSON_HEADERS, errorResponse(msg.id, notAcceptable));
    const parsed = parseSubscriptionFilter(msg.params);
    if (!parsed.ok) return ex.send(400, JSON_HEADERS, errorResponse(msg.id, parsed.error));
    const deviceId = cred.token.deviceId;
    const init = await cachedInitialize(this.ctx, deviceId);
    const honoured = honouredFilter(parsed.filter, init.capabilities);
    if (ex.aborted) return;
    let stream: SseStream | undefined;
    /** Notifications that came before the acknowledgment was written; undefined once it was. */
    let held: string[] | undefined = [];
    /** The relay ended the stream before it opened: it opens, acknowledges and ends at once. */
    let endedEarly = false;
    const close = () => {
      if (!stream) return void (endedEarly = true);
      if (stream.closed) return;
      stream.send(stringifyJson(subscriptionClosedResult(msg.id, init.serverInfo)));
      stream.end();
    };
    const listener: Listener = {
      sessionId: `listen:${String(msg.id)}`,
      tokenId: cred.token.id,
      accountId: cred.account.id,
      deliver: (frame) => {
        let n: unknown;
        try {
          n = parseJson(typeof frame === 'string' ? frame : frame.toString('utf8'));
        } catch {
          return;
        }
        const out = subscriptionNotification(n, msg.id, honoured);
        if (!out) return;
        if (held) held.push(stringifyJson(out));
        else stream?.send(stringifyJson(out));
      },
      end: close,
    };
    let remove: () => void;
    try {
      remove = await this.ctx.hub.listen(deviceId, listener);
    } catch {
      // The bus does not answer: nothing could reach the stream (as a GET's 503, get-streams.ts).
      return ex.send(
        503,
        { ...JSON_HEADERS, 'Retry-After': '1' },
        errorResponse(msg.id, relayError('relay_unavailable')),
      );
    }
    if (ex.aborted) return remove();
    // Revoked while this request was on its way (authenticated from the cache just before):
    // the answer a call gets (InFlightCalls.forward).
    if (this.ctx.hub.isRevoked({ tokenId: cred.token.id, deviceId, accountId: cred.account.id })) {
      remove();
      return ex.send(200, JSON_HEADERS, errorResponse(msg.id, relayError('cancelled', 'the credential was revoked')));
    }
    const sse = (stream = new SseStream(ex, {}, undefined, false));
    sse.onClose(remove);
    sse.onClose(this.ctx.hub.admitStream(cred.token.id, this.ctx.config.budgets.maxStreamsPerKey, { end: close }));
    sse.send(stringifyJson(acknowledgeSubscription(msg.id, honoured)));
    const early = held;
    held = undefined;
    for (const line of early) sse.send(line);
    if (endedEarly) close();
  }
}

/** The phone's -32021 (a capability the client did not declare) is an HTTP 400 on this revision. */
function missingCapability(frame: Buffer): boolean {
  if (frame.length > 16 * 1024 || frame.indexOf(String(MISSING_REQUIRED_CLIENT_CAPABILITY)) < 0) return false;
  try {
    return (
      (JSON.parse(frame.toString('utf8')) as { error?: { code?: number } }).error?.code ===
      MISSING_REQUIRED_CLIENT_CAPABILITY
    );
  } catch {
    return false;
  }
}
