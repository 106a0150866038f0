// OpenTelemetry traces, configured only by the standard OTEL_* variables and off unless an
// OTLP endpoint is set (docs/decisions/0110-tracing-off-by-default-explicit-context.md).
// Off, nothing here runs on a request: call sites test `tracingOn` (one boolean) before calling
// in. On, spans are started with an explicit parent context (no context manager, no global
// provider or propagator), and no attribute or event carries a token, code, key, argument,
// result or message text: names, ids, codes and sizes only. The SDK's pipeline
// (tracing-pipeline.ts) is loaded only when tracing is on.
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import { tracesEndpoint, type Env } from './tracing-endpoint.ts';
import type { Tracing } from './tracing-pipeline.ts';

export { SpanKind };
export type { Context, Span };
export { TracingConfigError } from './tracing-endpoint.ts';
export type { Tracing } from './tracing-pipeline.ts';

// --- the relay's process-wide pipeline ---------------------------------------------------------

/**
 * The one boolean every call site tests before calling into this module. An ESM live binding:
 * importers see it change when startRelayTracing runs (once, at process start).
 */
export let tracingOn = false;
let relay: Tracing | undefined;

/**
 * `phonebridge serve`: starts the pipeline if the environment asks for one. Off (the default),
 * the SDK is not loaded at all.
 */
export async function startRelayTracing(instanceId: string, env: Env = process.env): Promise<Tracing | undefined> {
  if (relay || tracesEndpoint(env) === undefined) return relay;
  const { createTracing } = await import('./tracing-pipeline.ts');
  relay ??= createTracing({ env, defaultServiceName: 'phonebridge', instanceId });
  tracingOn = relay !== undefined;
  return relay;
}

/** Exports what is buffered and stops (drain, exit). */
export async function stopRelayTracing(): Promise<void> {
  const r = relay;
  relay = undefined;
  tracingOn = false;
  await r?.shutdown().catch(() => {});
}

/** What the process holds, for tests and /readyz-style checks: nothing at all when off. */
export function relayTracingState(): { on: boolean; exporter?: SpanExporter; processor?: SpanProcessor } {
  return relay ? { on: true, exporter: relay.exporter, processor: relay.processor } : { on: false };
}

// --- W3C trace context ---------------------------------------------------------------------------

const w3c = new W3CTraceContextPropagator();
type Carrier = Record<string, unknown>;
const getter: TextMapGetter<Carrier> = {
  keys: (c) => Object.keys(c),
  get: (c, k) => (typeof c[k] === 'string' ? c[k] : undefined),
};
const setter: TextMapSetter<Carrier> = { set: (c, k, v) => void (c[k] = v) };

/** The remote parent named by `traceparent` (and `tracestate`) in a carrier, if it is valid. */
export function extractContext(carrier: Carrier | undefined): Context | undefined {
  if (!carrier || typeof carrier.traceparent !== 'string') return undefined;
  const ctx = w3c.extract(ROOT_CONTEXT, carrier, getter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/** The `traceparent` of a span, to carry it to the next hop. */
export function traceparentOf(span: Span): string {
  const c: Carrier = {};
  w3c.inject(trace.setSpan(ROOT_CONTEXT, span), c, setter);
  return c.traceparent as string;
}

const metaOf = (params: Record<string, unknown> | undefined): Carrier | undefined => {
  const m = params?._meta;
  return m && typeof m === 'object' && !Array.isArray(m) ? (m as Carrier) : undefined;
};

/**
 * params with `_meta.traceparent` replaced by the span's (SEP-414): the phone continues the
 * relay's trace. The client's tracestate and baggage travel on untouched, as every other key.
 */
export function withTraceparent(params: Record<string, unknown> | undefined, span: Span): Record<string, unknown> {
  return { ...params, _meta: { ...metaOf(params), traceparent: traceparentOf(span) } };
}

// --- spans ---------------------------------------------------------------------------------------

/** Where a message is cut before it becomes a span name or attribute (names, never content). */
const MAX_NAME = 128;
const cut = (s: string) => (s.length > MAX_NAME ? s.slice(0, MAX_NAME) : s);

interface RequestLike {
  id?: unknown;
  method: string;
  params?: Record<string, unknown>;
}

/** The MCP semantic conventions' name and attributes of one request (no argument, no URI). */
export function mcpAttributes(msg: RequestLike, requestId?: string | number): { name: string; attributes: Attributes } {
  const method = cut(msg.method);
  const attributes: Attributes = { 'mcp.method.name': method };
  let target: string | undefined;
  const name = msg.params?.name;
  if (typeof name === 'string' && (method === 'tools/call' || method === 'prompts/get')) {
    target = cut(name);
    if (method === 'tools/call') {
      attributes['gen_ai.tool.name'] = target;
      attributes['gen_ai.operation.name'] = 'execute_tool';
    } else attributes['gen_ai.prompt.name'] = target;
  }
  const id = requestId ?? msg.id;
  if (typeof id === 'string' || typeof id === 'number') attributes['jsonrpc.request.id'] = cut(String(id));
  return { name: target ? `${method} ${target}` : method, attributes };
}

interface ErrorLike {
  code: number;
  data?: unknown;
}

/** Marks a span failed with a low-cardinality error.type (it still has to be ended). */
export function markFailed(span: Span, type: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: SpanStatusCode.ERROR, message: type });
}

/** error.type: the relay's error name (`device_offline`…) when it has one, else the JSON-RPC code. */
export function endWithError(span: Span, error: ErrorLike): void {
  const named = (error.data as { code?: unknown } | undefined)?.code;
  const type = typeof named === 'string' ? cut(named) : String(error.code);
  span.setAttribute('rpc.response.status_code', String(error.code));
  // The description is the error's name only: a message can echo what the client sent.
  markFailed(span, type);
  span.end();
}

/**
 * Ends a span on a response frame: a JSON-RPC error or a tool result with isError marks it
 * failed. Only the members that say so are read (a frame over 64 KiB only at its head).
 */
export function endWithFrame(span: Span, frame: Buffer): void {
  if (!span.isRecording()) return span.end(); // sampled out: nothing to read the frame for
  let error: ErrorLike | undefined;
  let toolError = false;
  if (frame.length <= 64 * 1024) {
    try {
      const parsed = JSON.parse(frame.toString('utf8')) as { error?: ErrorLike; result?: { isError?: unknown } };
      if (parsed.error && typeof parsed.error.code === 'number') error = parsed.error;
      else toolError = parsed.result?.isError === true;
    } catch {
      // not ours to judge: the client gets it as it came
    }
  } else {
    const head = /"error"\s*:\s*\{\s*"code"\s*:\s*(-?\d+)/.exec(frame.toString('latin1', 0, 256));
    if (head) error = { code: Number(head[1]) };
  }
  if (error) return endWithError(span, error);
  if (toolError) markFailed(span, 'tool_error');
  span.end();
}

interface SinkLike {
  respond(frame: Buffer): void;
  related?(frame: Buffer): void;
  fail(error: ErrorLike): void;
}

/** The sink, ending the span on its answer (or failure) before passing it on. */
export function endOnAnswer<S extends SinkLike>(sink: S, span: Span): S {
  return {
    ...sink,
    respond: (frame: Buffer) => {
      endWithFrame(span, frame);
      sink.respond(frame);
    },
    fail: (error: ErrorLike) => {
      endWithError(span, error);
      sink.fail(error);
    },
  };
}

/** The relay's tracer (callers check tracingOn first). */
export function relayTracer(): Tracer {
  return relay!.tracer;
}

/** A span of the relay's pipeline (callers check tracingOn first). */
export function startSpan(
  name: string,
  kind: SpanKind,
  attributes?: Attributes,
  parent: Context = ROOT_CONTEXT,
  links?: Link[],
): Span {
  return relay!.tracer.startSpan(name, { kind, attributes, links }, parent);
}

/** A context whose current span is `span`: the parent of the next one. */
export function contextWith(span: Span, parent: Context = ROOT_CONTEXT): Context {
  return trace.setSpan(parent, span);
}

/** `{trace_id, span_id}` for a log line. */
export function logFields(span: Span | undefined): { trace_id: string; span_id: string } | undefined {
  if (!span) return undefined;
  const c = span.spanContext();
  return { trace_id: c.traceId, span_id: c.spanId };
}
