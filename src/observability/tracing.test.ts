// The pure parts of src/observability/tracing.ts. docs/OPERATIONS.md "Traces": "`error.type`: the
// relay's error name (`device_offline`, `timeout`, `insufficient_scope`, …), else the JSON-RPC
// error code, or `tool_error` for a tool result with `isError`"; docs/decisions/0111: "The
// client's `tracestate` and `baggage` are forwarded as sent".
import { describe, expect, it } from 'vitest';
import { createTraceState, trace } from '@opentelemetry/api';
import { relayError } from '../protocol/errors.ts';
import { insufficientScopeError } from '../protocol/scopes.ts';
import { errorType, resultIsError, withTraceparent } from './tracing.ts';

describe('errorType', () => {
  it("is the relay's name for the relay's errors", () => {
    expect(errorType(relayError('device_offline'))).toBe('device_offline');
    expect(errorType(relayError('timeout', 'no answer within 30 s'))).toBe('timeout');
    expect(errorType(insufficientScopeError('devices:act'))).toBe('insufficient_scope');
    // The reference phone's own refusal of a large frame (src/device/agent/ws-transport.ts).
    expect(errorType({ code: -31003, data: { code: 'too_large', bytes: 1, limit: 1 } })).toBe('too_large');
  });

  it('is the JSON-RPC code for any other data.code', () => {
    expect(errorType({ code: -32000, data: { code: 'the argument' } })).toBe('-32000');
    expect(errorType({ code: -32000, data: { code: 'toString' } })).toBe('-32000');
    expect(errorType({ code: -32000, data: { code: '__proto__' } })).toBe('-32000');
    // A relay name under another code is not the relay's error.
    expect(errorType({ code: -32000, data: { code: 'timeout' } })).toBe('-32000');
    expect(errorType({ code: -32602, data: null })).toBe('-32602');
    expect(errorType({ code: -32601 })).toBe('-32601');
  });
});

describe('resultIsError', () => {
  const is = (s: string) => resultIsError(Buffer.from(s));

  it("reads the result's own isError, wherever it stands", () => {
    expect(is('{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[]}}')).toBe(true);
    expect(is('{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"isError":true}}')).toBe(true);
    expect(is('{ "result" : {\n "content" : [ ] ,\n "isError" : true\n} , "id" : 1 }')).toBe(true);
    expect(is('{"jsonrpc":"2.0","id":1,"result":{"isError":false,"content":[]}}')).toBe(false);
    expect(is('{"jsonrpc":"2.0","id":1,"result":{"isError":"true","content":[]}}')).toBe(false);
  });

  it('takes no isError that is not the result member', () => {
    const text = (t: string) => `{"id":1,"result":{"content":[{"type":"text","text":${JSON.stringify(t)}}]}}`;
    expect(is(text('"isError":true'))).toBe(false);
    expect(is(text('{"result":{"isError":true}}'))).toBe(false);
    expect(is(text('\\'))).toBe(false);
    expect(is(text('\\"isError":true'))).toBe(false);
    expect(is('{"id":1,"result":{"content":[{"type":"text","text":"x","isError":true}]}}')).toBe(false);
    expect(is('{"id":1,"result":{"structuredContent":{"isError":true}}}')).toBe(false);
    expect(is('{"id":1,"isError":true,"result":{}}')).toBe(false);
    expect(is('{"id":1,"error":{"code":1,"data":{"isError":true}}}')).toBe(false);
    expect(is('{"id":1,"result":[{"isError":true}]}')).toBe(false);
    expect(is('{"id":1,"result":{"x\\"isError":true}}')).toBe(false);
  });

  it('is false for a frame that is not JSON', () => {
    expect(is('{"id":1,"result":{"isError":tr')).toBe(false);
    expect(is('{"id":1,"result":{"content":"isError')).toBe(false);
    expect(is('')).toBe(false);
  });

  it('agrees with JSON.parse(frame).result?.isError === true on generated frames', () => {
    let seed = 7; // mulberry32: the same frames every run
    const rnd = (n: number) => {
      let x = (seed = (seed + 0x6d2b79f5) | 0);
      x = Math.imul(x ^ (x >>> 15), x | 1);
      x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
      return ((x ^ (x >>> 14)) >>> 0) % n;
    };
    const keys = ['isError', 'result', 'content'];
    const strings = ['isError', '"isError":true', '{"isError":true}', 'a\\', '\\"', 'x'];
    const value = (d: number): unknown => {
      switch (rnd(d > 3 ? 5 : 7)) {
        case 0:
          return true;
        case 1:
          return false;
        case 2:
          return -1.5e3;
        case 3:
          return strings[rnd(strings.length)];
        case 4:
          return null;
        case 5:
          return Array.from({ length: rnd(3) }, () => value(d + 1));
        default:
          return Object.fromEntries(Array.from({ length: rnd(4) }, () => [keys[rnd(3)], value(d + 1)]));
      }
    };
    let marked = 0;
    for (let n = 0; n < 20_000; n++) {
      const frame = JSON.stringify({ jsonrpc: '2.0', id: n, [keys[rnd(3)]]: value(1), result: value(1) }, null, rnd(2));
      const want = (JSON.parse(frame) as { result?: { isError?: unknown } }).result?.isError === true;
      if (want) marked++;
      expect(is(frame), frame).toBe(want);
    }
    expect(marked).toBeGreaterThan(100);
  });
});

describe('withTraceparent', () => {
  const traceId = '0af7651916cd43dd8448eb211c80319c';
  const span = (traceState?: string) =>
    trace.wrapSpanContext({
      traceId,
      spanId: 'b7ad6b7169203331',
      traceFlags: 1,
      ...(traceState ? { traceState: createTraceState(traceState) } : {}),
    });
  const tp = `00-${traceId}-b7ad6b7169203331-01`;

  it("replaces the client's traceparent and keeps every other _meta key as sent", () => {
    const params = {
      name: 't',
      _meta: { traceparent: 'x', tracestate: 'a=1 , b=2', baggage: 'k=v', progressToken: 3 },
    };
    expect(withTraceparent(params, span('a=1,b=2'))).toEqual({
      name: 't',
      _meta: { traceparent: tp, tracestate: 'a=1 , b=2', baggage: 'k=v', progressToken: 3 },
    });
  });

  it("carries the span's tracestate (the HTTP header's) when _meta has none", () => {
    expect(withTraceparent({ name: 't' }, span('vendor=abc'))).toEqual({
      name: 't',
      _meta: { traceparent: tp, tracestate: 'vendor=abc' },
    });
    expect(withTraceparent(undefined, span())).toEqual({ _meta: { traceparent: tp } });
  });
});
