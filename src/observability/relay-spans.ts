// The relay's spans, one function per call site so that each site is a line or two behind
// `if (tracingOn)` (docs/OPERATIONS.md, "Traces", lists them). Nothing here is reached when
// tracing is off.
import { performance } from 'node:perf_hooks';
import { ROOT_CONTEXT, trace, type Context, type Link, type Span } from '@opentelemetry/api';
import {
  contextWith,
  endWithError,
  extractContext,
  logFields,
  markFailed,
  mcpAttributes,
  relayTracer,
  SpanKind,
  startSpan,
  traceContextOf,
} from './tracing.ts';

interface RequestLike {
  id?: unknown;
  method: string;
  params?: Record<string, unknown>;
}

/** What an /mcp exchange brought for tracing, kept beside it (never on the hot path when off). */
interface HttpTrace {
  carrier?: Record<string, string>;
  version?: string;
  /** The exchange's SERVER span (the last one, for a batch): its log lines and exemplar. */
  span?: Span;
}
const exchanges = new WeakMap<object, HttpTrace>();

/** Call before any await: copies the W3C headers of the request and its MCP version header. */
export function noteHttpRequest(
  ex: object,
  req: { getHeader(name: string): string },
  headers: Record<string, string>,
): void {
  const traceparent = req.getHeader('traceparent');
  const tracestate = req.getHeader('tracestate');
  exchanges.set(ex, {
    carrier: traceparent ? { traceparent, ...(tracestate ? { tracestate } : {}) } : undefined,
    version: headers['mcp-protocol-version'],
  });
}

const metaOf = (params: Record<string, unknown> | undefined): Record<string, unknown> | undefined => {
  const m = params?._meta;
  return m && typeof m === 'object' && !Array.isArray(m) ? (m as Record<string, unknown>) : undefined;
};

/**
 * The SERVER span of one client request. Its parent is the client's `_meta.traceparent`
 * (SEP-414), else the HTTP `traceparent` header; with both, the HTTP context is a link (the
 * MCP semantic conventions: MCP and transport contexts are independent).
 */
export function serverSpan(
  ex: object,
  msg: RequestLike,
  sessionId: string | undefined,
  startTime?: number,
): { span: Span; ctx: Context } {
  const http = exchanges.get(ex);
  const meta = metaOf(msg.params);
  const fromMeta = extractContext(meta);
  const fromHttp = http?.carrier && extractContext(http.carrier);
  const links: Link[] | undefined = fromMeta && fromHttp ? [{ context: trace.getSpanContext(fromHttp)! }] : undefined;
  const { name, attributes } = mcpAttributes(msg);
  if (sessionId !== undefined) attributes['mcp.session.id'] = sessionId;
  const version = http?.version ?? meta?.['io.modelcontextprotocol/protocolVersion'];
  if (typeof version === 'string') attributes['mcp.protocol.version'] = version.slice(0, 32);
  attributes['network.transport'] = 'tcp';
  attributes['network.protocol.name'] = 'http';
  const span = relayTracer().startSpan(
    name,
    { kind: SpanKind.SERVER, attributes, links, startTime },
    fromMeta ?? fromHttp ?? ROOT_CONTEXT,
  );
  if (http) http.span = span;
  return { span, ctx: contextWith(span) };
}

/** A request the relay answers itself (initialize, server/discover): its SERVER span, already over. */
export function answeredSpan(
  ex: object,
  msg: RequestLike,
  sessionId: string | undefined,
  startedAt = performance.now(),
): void {
  serverSpan(ex, msg, sessionId, performance.timeOrigin + startedAt).span.end();
}

/** `{trace_id, span_id}` of the exchange's SERVER span, for its log lines. */
export function requestLogFields(ex: object): { trace_id: string; span_id: string } | undefined {
  return logFields(exchanges.get(ex)?.span);
}

/** The trace id for the latency histogram's exemplar: sampled traces only (others are not kept). */
export function exemplarTraceId(ex: object): string | undefined {
  const c = exchanges.get(ex)?.span?.spanContext();
  return c && c.traceFlags & 1 ? c.traceId : undefined;
}

// --- the bus hop ---------------------------------------------------------------------------------

/**
 * PRODUCER: the origin publishes a request to the owner node. Its traceparent rides in the
 * request's bus header (`tp`) so that the owner's CONSUMER span is its child, with the
 * client's tracestate (`tst`): the owner writes it to the phone as a single node would.
 */
export function busSendSpan(
  parent: Context | undefined,
  method: string,
  toNode: string,
): { tp: string; tst: string | undefined; end(delivered: boolean): void } {
  const span = startSpan(
    'send phonebridge.node',
    SpanKind.PRODUCER,
    {
      'messaging.system': 'redis',
      'messaging.operation.type': 'send',
      'messaging.destination.name': toNode,
      'mcp.method.name': method.slice(0, 128),
    },
    parent,
  );
  const { traceparent, tracestate } = traceContextOf(span);
  return {
    tp: traceparent,
    tst: tracestate,
    end(delivered) {
      if (!delivered) markFailed(span, 'not_delivered');
      span.end();
    },
  };
}

/** CONSUMER: the owner runs a request another node sent; it ends when the answer is published. */
export function busServeSpan(tp: string | undefined, tst: string | undefined, method: string, fromNode: string): Span {
  return startSpan(
    'process phonebridge.node',
    SpanKind.CONSUMER,
    {
      'messaging.system': 'redis',
      'messaging.operation.type': 'process',
      'messaging.source.name': fromNode,
      'mcp.method.name': method.slice(0, 128),
    },
    tp ? extractContext({ traceparent: tp, tracestate: tst }) : undefined,
  );
}

/** Ends a CONSUMER span on the owner's reply (an error reply marks it failed). */
export function endServe(span: Span, error?: { code: number; data?: unknown }): void {
  if (error) endWithError(span, error);
  else span.end();
}

// --- the phone round trip ------------------------------------------------------------------------

/** CLIENT: the relay, as the phone's MCP client, sends it one request and waits for the answer. */
export function phoneCallSpan(parent: Context, msg: RequestLike, relayId: number): Span {
  const { name, attributes } = mcpAttributes(msg, relayId);
  attributes['network.protocol.name'] = 'websocket';
  return startSpan(name, SpanKind.CLIENT, attributes, parent);
}

// --- pairing, device auth, the device socket's life ---------------------------------------------

export function pairSpan(): Span {
  return startSpan('POST /pair', SpanKind.SERVER, { 'http.request.method': 'POST', 'http.route': '/pair' });
}

export function deviceAuthSpan(): Span {
  return startSpan('phonebridge.device.auth', SpanKind.SERVER, { 'http.route': '/device/ws' });
}

/** The verdict on a phone's signed upgrade; the reason is the relay's own fixed text. */
export function endDeviceAuth(span: Span, ok: boolean, reason: string | undefined): Context {
  span.setAttribute('phonebridge.device.auth.outcome', ok ? 'ok' : 'rejected');
  if (!ok) markFailed(span, reason ?? 'rejected');
  span.end();
  return contextWith(span);
}

/** initialize + tools/list on a new socket (the relay is the phone's client). */
export function traceHandshake(parent: Context | undefined, ready: Promise<void>): void {
  const span = startSpan('phonebridge.device.handshake', SpanKind.CLIENT, {}, parent);
  ready.then(
    () => span.end(),
    () => {
      markFailed(span, 'handshake_failed');
      span.end();
    },
  );
}

/** The socket closed: a span of no length, in the same trace as its authentication. */
export function traceDisconnect(parent: Context | undefined, code: number, connectedAt: number): void {
  startSpan(
    'phonebridge.device.disconnect',
    SpanKind.INTERNAL,
    { 'phonebridge.device.close_code': code, 'phonebridge.device.connected_ms': Date.now() - connectedAt },
    parent,
  ).end();
}
