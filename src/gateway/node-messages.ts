// What nodes say to each other about client requests: the origin's `req`, `note`, `cancel`,
// `orphan` and `ccancel` (router.ts), the owner's `res`, `rel`, `fail` and `redo`
// (served-requests.ts), and a stopping node's `bye`. Each is one JSON header line, then an
// optional raw payload (a phone frame travels unescaped). Written and read by
// src/bus/formats.ts, which versions them.
import type { JsonRpcErrorObject } from '../protocol/errors.ts';
import type { JsonRpcId, JsonRpcRequest } from '../protocol/jsonrpc.ts';
import type { ClientRequestBytes } from '../protocol/request-bytes.ts';
import type { Scope } from '../store/types.ts';
import { encodeNodeMessage } from '../bus/formats.ts';

/**
 * Extra time the origin waits beyond the owner's own timeout before giving up itself; the
 * owner keeps retrying its answer as long (Served).
 */
export const ORIGIN_GRACE_MS = 2_000;

export type Header =
  | {
      t: 'req';
      from: string;
      rid: number;
      deviceId: string;
      epoch: number;
      id: JsonRpcRequest['id'];
      method: string;
      scopes: Scope[];
      tokenId?: string;
      timeoutMs: number;
      /** The origin's PRODUCER span (W3C traceparent), only while it traces (docs/decisions/0111-trace-context-on-the-bus-and-in-meta.md). */
      tp?: string;
      /**
       * 1: the origin read the request from its bytes, and the payload (params with the caller
       * context, as always) is forwarded to the phone without a parse
       * (docs/decisions/0134-cross-node-bytes.md). A node that does not know `b` parses it.
       */
      b?: 1;
      /** With `b`: params.name and wait_for_events' wait in seconds (timeout_s, or timeout_ms / 1000), as the origin read them. */
      tn?: string;
      ts?: number;
    }
  | { t: 'note'; deviceId: string; method: string }
  | { t: 'cancel'; from: string; rid: number }
  | { t: 'orphan'; from: string; rid: number }
  | { t: 'ccancel'; sessionId: string; requestId: JsonRpcId }
  | { t: 'res' | 'rel'; rid: number }
  | { t: 'redo'; rid: number; why: 'moving' | 'gone' }
  /** Redis' own word, to the origin, that nobody heard its `req` (bus sendOrBounce). */
  | { t: 'unheard'; rid: number }
  | { t: 'fail'; rid: number; error: JsonRpcErrorObject }
  | { t: 'bye'; from: string };

export type ReqHeader = Extract<Header, { t: 'req' }>;

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

export function encode(h: Header, payload = ''): string {
  return encodeNodeMessage(h, payload);
}

/** What a node stopping on purpose sends every other node (see Router.farewell). */
export function farewellMessage(nodeId: string): string {
  return encode({ t: 'bye', from: nodeId });
}

/**
 * A forwarded request (Header `b`) to start with handleClientBytes, or undefined if its
 * payload is not a JSON object: the origin checked the client's JSON and UTF-8
 * (src/protocol/request-bytes.ts) and built the payload from it.
 */
export function forwardedBytes(h: ReqHeader, params: Buffer): ClientRequestBytes | undefined {
  if (params.length < 2 || params[0] !== OPEN_BRACE || params[params.length - 1] !== CLOSE_BRACE) return undefined;
  return {
    id: h.id,
    method: h.method,
    toolName: h.tn,
    timeoutS: h.ts,
    body: params,
    methodStart: 0,
    methodEnd: 0,
    paramsStart: 0,
    paramsEnd: params.length,
    paramsMembers: true,
    forwarded: true,
  };
}
