// How the answer to one request in one POST (session revisions, the general path) goes back:
// JSON, an SSE stream, or the relay's own 400 or 403. FastPost (fast-post.ts) does the same
// for the calls it takes.
import type { Exchange } from './http.ts';
import type { McpHeaders } from './mcp-headers.ts';
import type { InFlightCalls } from './in-flight.ts';
import { JSON_HEADERS, SLOW_ANSWER_MS } from './mcp-stateless.ts';
import { SseStream } from './sse.ts';
import { EventStream, newStreamId } from './session-streams.ts';
import type { Credential } from './auth.ts';
import type { GatewayContext } from './context.ts';
import type { SessionRecord } from '../bus/types.ts';
import type { JsonRpcRequest } from '../protocol/jsonrpc.ts';
import { INVALID_REQUEST } from '../protocol/errors.ts';
import { requestTimeoutMs } from '../protocol/timeouts.ts';
import { insufficientScopeChallenge } from '../protocol/scopes.ts';
import type { Scope } from '../store/types.ts';

/** Counts an answered request in the metrics (and the debug log): McpEndpoint.observe. */
export type ObserveCall = (
  method: string,
  started: number,
  bytesIn: number,
  bytesOut: number,
  outcome: string,
  ex?: Exchange,
) => void;

export interface AnswerHost {
  readonly ctx: GatewayContext;
  readonly calls: InFlightCalls;
  readonly observe: ObserveCall;
}

/**
 * One request, one POST. JSON when the answer is ready within SLOW_ANSWER_MS; otherwise,
 * when the client accepts it, an SSE stream (keep-alives so idle proxies do not cut a long
 * call, event ids so a dropped one resumes). A request carrying a progress token is always
 * an SSE stream (its progress travels on it only,
 * docs/decisions/0007-what-the-relay-rewrites.md) when the client accepts one; without, its
 * progress is dropped (docs/decisions/0215-post-media-types.md). A call outside the
 * credential's scopes is a 403 with the scope challenge.
 */
export async function answerOne(
  host: AnswerHost,
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
      host.ctx.bus,
      session.id,
      newStreamId({
        deadline: Date.now() + requestTimeoutMs(msg.method, msg.params, host.ctx.config.requestTimeoutMs),
      }),
      new SseStream(ex, {}),
    );
    if (session.revision === '2025-11-25') void stream.prime();
    return stream;
  };
  const early = sseOk ? setTimeout(() => ex.aborted || open(), SLOW_ANSWER_MS) : undefined;
  const outcome = await host.calls.forward(
    ex,
    cred,
    session.deviceId,
    session.id,
    msg,
    // A client without text/event-stream in Accept gets JSON only, so its progress is dropped
    // (docs/decisions/0215-post-media-types.md).
    sseOk ? (frame) => void open().send(frame) : undefined,
    () => stream !== undefined,
  );
  clearTimeout(early);
  // The relay's own -32600: the id is in use by a request in flight (InFlightCalls.forward).
  if (outcome.refusal?.code === INVALID_REQUEST && !stream) {
    ex.send(400, JSON_HEADERS, outcome.frame);
    host.observe(msg.method, started, bytesIn, outcome.frame.length, 'error', ex);
    return;
  }
  if (outcome.refusal?.data && (outcome.refusal.data as { code?: string }).code === 'insufficient_scope' && !stream) {
    const scope = (outcome.refusal.data as { scope: Scope }).scope;
    ex.send(403, { ...JSON_HEADERS, 'WWW-Authenticate': insufficientScopeChallenge(scope) }, outcome.frame);
    host.observe(msg.method, started, bytesIn, outcome.frame.length, 'forbidden', ex);
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
  host.observe(
    msg.method,
    started,
    bytesIn,
    outcome.frame.length,
    ex.aborted ? 'aborted' : outcome.refusal ? 'error' : 'ok',
    ex,
  );
}
