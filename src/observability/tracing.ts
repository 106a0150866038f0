// OpenTelemetry traces, configured only by the standard OTEL_* variables and off unless an
// OTLP endpoint is set (docs/decisions/0110-tracing-off-by-default-explicit-context.md).
// Off, nothing here runs on a request: call sites test `tracingOn` (one boolean) before calling
// in. On, spans are started with an explicit parent context (no context manager, no global
// provider or propagator), and no attribute or event carries a token, code, key, argument,
// result or message text: names, ids, codes and sizes only. The SDK's pipeline
// (tracing-pipeline.ts) is loaded only when tracing is on.
import process from 'node:process';
import { Buffer } from 'node:buffer';
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
import { RELAY_ERRORS, type RelayErrorName } from '../protocol/errors.ts';
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

// Built on first use, which is only ever with tracing on: off, no propagator exists (0110).
let w3cPropagator: W3CTraceContextPropagator | undefined;
const w3c = () => (w3cPropagator ??= new W3CTraceContextPropagator());
type Carrier = Record<string, unknown>;
const getter: TextMapGetter<Carrier> = {
  keys: (c) => Object.keys(c),
  get: (c, k) => (typeof c[k] === 'string' ? c[k] : undefined),
};
const setter: TextMapSetter<Carrier> = { set: (c, k, v) => void (c[k] = v) };

/** The remote parent named by `traceparent` (and `tracestate`) in a carrier, if it is valid. */
export function extractContext(carrier: Carrier | undefined): Context | undefined {
  if (!carrier || typeof carrier.traceparent !== 'string') return undefined;
  const ctx = w3c().extract(ROOT_CONTEXT, carrier, getter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/** The W3C headers of a span: `traceparent`, and `tracestate` when its context has one. */
function injected(span: Span): Carrier {
  const c: Carrier = {};
  w3c().inject(trace.setSpan(ROOT_CONTEXT, span), c, setter);
  return c;
}

/** The `traceparent` of a span and its context's `tracestate`, if any, to carry both to the next hop. */
export function traceContextOf(span: Span): { traceparent: string; tracestate: string | undefined } {
  const c = injected(span);
  return {
    traceparent: c.traceparent as string,
    tracestate: typeof c.tracestate === 'string' && c.tracestate !== '' ? c.tracestate : undefined,
  };
}

const metaOf = (params: Record<string, unknown> | undefined): Carrier | undefined => {
  const m = params?._meta;
  return m && typeof m === 'object' && !Array.isArray(m) ? (m as Carrier) : undefined;
};

/**
 * params with `_meta.traceparent` replaced by the span's (SEP-414): the phone continues the
 * relay's trace. The client's `_meta.tracestate` and `baggage` travel on untouched, as every
 * other key; without a `_meta.tracestate`, the span's own (the client's `tracestate` HTTP header,
 * inherited with the `traceparent` header the SERVER span continued) goes with the traceparent
 * (docs/decisions/0111-trace-context-on-the-bus-and-in-meta.md).
 */
export function withTraceparent(params: Record<string, unknown> | undefined, span: Span): Record<string, unknown> {
  const meta = metaOf(params);
  const { traceparent, tracestate } = injected(span);
  const out: Carrier = { ...meta, traceparent };
  if (typeof tracestate === 'string' && !(meta && 'tracestate' in meta)) out.tracestate = tracestate;
  return { ...params, _meta: out };
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

/**
 * error.type: the relay's error name (`device_offline`…, src/protocol/errors.ts) when the error
 * is one of the relay's, else the JSON-RPC code. `data.code` is read only as one of those
 * names with its own code: an answer from the phone can put anything there (a tool echoing
 * its argument), and no span holds an argument (docs/decisions/0110).
 */
export function errorType(error: ErrorLike): string {
  const named = (error.data as { code?: unknown } | null | undefined)?.code;
  return typeof named === 'string' &&
    Object.hasOwn(RELAY_ERRORS, named) &&
    RELAY_ERRORS[named as RelayErrorName].code === error.code
    ? named
    : String(error.code);
}

/** Ends a failed span: error.type and the status description are errorType's (a name or a code). */
export function endWithError(span: Span, error: ErrorLike): void {
  const type = errorType(error);
  span.setAttribute('rpc.response.status_code', String(error.code));
  // The description is the error's name only: a message can echo what the client sent.
  markFailed(span, type);
  span.end();
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const isSpace = (c: number | undefined) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** The index of the quote closing the JSON string opened at `open`, or -1 (not JSON). */
function stringEnd(b: Buffer, open: number): number {
  for (let q = open; ;) {
    q = b.indexOf(QUOTE, q + 1);
    if (q < 0) return -1;
    let n = 0;
    while (b[q - 1 - n] === BACKSLASH) n++;
    if ((n & 1) === 0) return q;
  }
}

const RESULT = Buffer.from('result');
const IS_ERROR = Buffer.from('isError');
const TRUE = Buffer.from('true');
// The bytes resultIsError stops at: a quote, an opening or a closing bracket.
const [STRING, OPENS, CLOSES] = [1, 2, 3];
const STRUCTURE = new Uint8Array(256);
STRUCTURE[QUOTE] = STRING;
STRUCTURE[0x7b] = STRUCTURE[0x5b] = OPENS;
STRUCTURE[0x7d] = STRUCTURE[0x5d] = CLOSES;

/**
 * Whether the JSON string between the quotes at `open` and `close` is spelled `name`. Bytes are
 * compared: a key spelled with escapes (`"is\u0045rror"`, which no JSON serializer writes) is
 * not read as `name`.
 */
const stringIs = (b: Buffer, open: number, close: number, name: Buffer) =>
  close - open - 1 === name.length && b.compare(name, 0, name.length, open + 1, close) === 0;

/**
 * Whether a response frame's `result` has `"isError": true` as its own member, as
 * `JSON.parse(frame).result?.isError === true` would say (the last of duplicate members wins),
 * without parsing it: strings are skipped by Buffer.indexOf, nesting is counted, and only the
 * keys of the top-level object and of `result` are read, so an `isError` in content text or in
 * a nested object is not taken. A frame that never spells `isError` is one native scan.
 */
export function resultIsError(b: Buffer): boolean {
  if (b.indexOf(IS_ERROR) < 0) return false;
  let depth = 0;
  let inResult = false; // depth 2 is the top-level `result` object
  let isError = false;
  const n = b.length;
  for (let i = 0; i < n; i++) {
    const k = STRUCTURE[b[i]];
    if (k === 0) continue;
    if (k === OPENS) depth++;
    else if (k === CLOSES) {
      if (--depth === 1) inResult = false;
    } else {
      const open = i;
      const close = stringEnd(b, open);
      if (close < 0) return false; // cut short: not JSON
      i = close;
      if (depth !== 1 && !(depth === 2 && inResult)) continue;
      let j = close + 1;
      while (isSpace(b[j])) j++;
      if (b[j] !== 0x3a) continue; // a string value, not a key
      j++;
      while (isSpace(b[j])) j++;
      if (depth === 1) {
        if (!stringIs(b, open, close, RESULT)) continue;
        isError = false; // a later `result` replaces an earlier one
        if (b[j] === 0x7b) {
          inResult = true;
          depth = 2;
          i = j;
        }
      } else if (stringIs(b, open, close, IS_ERROR)) {
        isError = j + 4 <= n && b.compare(TRUE, 0, 4, j, j + 4) === 0;
      }
    }
  }
  return isError;
}

/**
 * Ends a span on a response frame: a JSON-RPC error or a tool result with isError marks it
 * failed. Only the members that say so are read: a frame up to 64 KiB is parsed; a larger one
 * is read for a JSON-RPC error at its head and scanned for its result's isError (resultIsError).
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
    else toolError = resultIsError(frame);
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
