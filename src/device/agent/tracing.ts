// The reference phone's traces: a SERVER span per tools/call it serves, the child of the
// relay's span named in `params._meta.traceparent` (SEP-414), exported like the relay's when
// the OTEL_* variables are set. It wraps the socket transport, so it covers every backend
// (simulated phone, bridged server) without touching their handlers. Names and ids only:
// never an argument or a result.
import process from 'node:process';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { createTracing } from '../../observability/tracing-pipeline.ts';
import {
  endWithError,
  extractContext,
  markFailed,
  mcpAttributes,
  SpanKind,
  type Span,
  type Tracing,
} from '../../observability/tracing.ts';

/** The phone's pipeline from the environment (service.instance.id = the device id), or undefined when off. */
export function phoneTracingFromEnv(deviceId: string, env = process.env): Tracing | undefined {
  return createTracing({
    env,
    defaultServiceName: 'phonebridge-device',
    instanceId: deviceId,
    scope: 'phonebridge-device',
  });
}

type Msg = Record<string, unknown>;

/** The transport the phone's MCP server is connected to, with one span per tools/call. */
export function tracedTransport(inner: Transport, tracing: Tracing): Transport {
  const spans = new Map<RequestId, Span>();
  const endAll = (type: string) => {
    for (const span of spans.values()) {
      markFailed(span, type);
      span.end();
    }
    spans.clear();
  };
  const outer: Transport = {
    start: () => inner.start(),
    close: () => inner.close(),
    send: (message: JSONRPCMessage, options?: TransportSendOptions) => {
      const m = message as Msg;
      const id = m.id as RequestId | undefined;
      const span = id !== undefined && !('method' in m) ? spans.get(id) : undefined;
      if (span) {
        spans.delete(id!);
        const error = m.error as { code: number; data?: unknown } | undefined;
        if (error) endWithError(span, error);
        else {
          if ((m.result as { isError?: unknown } | undefined)?.isError === true) markFailed(span, 'tool_error');
          span.end();
        }
      }
      return inner.send(message, options);
    },
  };
  if (inner.setProtocolVersion) outer.setProtocolVersion = (v) => inner.setProtocolVersion!(v);
  const previousError = inner.onerror;
  inner.onerror = (e) => {
    previousError?.(e);
    outer.onerror?.(e);
  };
  inner.onclose = () => {
    endAll('connection_closed');
    outer.onclose?.();
  };
  inner.onmessage = (message, extra) => {
    const m = message as Msg;
    if (m.method === 'tools/call' && m.id !== undefined) {
      const params = m.params as Record<string, unknown> | undefined;
      const meta = params?._meta as Record<string, unknown> | undefined;
      const { name, attributes } = mcpAttributes({ id: m.id, method: 'tools/call', params });
      attributes['network.protocol.name'] = 'websocket';
      const parent = extractContext(meta && typeof meta === 'object' ? meta : undefined);
      spans.set(m.id as RequestId, tracing.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent));
    } else if (m.method === 'notifications/cancelled') {
      const requestId = (m.params as { requestId?: RequestId } | undefined)?.requestId;
      const span = requestId === undefined ? undefined : spans.get(requestId);
      if (span) {
        spans.delete(requestId!);
        markFailed(span, 'cancelled');
        span.end();
      }
    }
    outer.onmessage?.(message, extra);
  };
  return outer;
}
