// What nodes say to each other about client requests: the origin's `req`, `note`, `cancel`,
// `orphan` and `ccancel` (router.ts), the owner's `res`, `rel`, `fail` and `redo`
// (served-requests.ts), and a stopping node's `bye`. Each is one JSON header line, then an
// optional raw payload (a phone frame travels unescaped). Written and read by
// src/bus/formats.ts, which versions them.
import type { JsonRpcErrorObject } from '../protocol/errors.ts';
import type { JsonRpcId } from '../protocol/jsonrpc.ts';
import type { ClientRequestBytes } from '../protocol/request-bytes.ts';
import type { Scope } from '../store/types.ts';
import { encodeNodeMessage } from '../bus/formats.ts';
import type { ReqHeader as ReqHeaderFields } from '../bus/req-header.ts';

/**
 * Extra time the origin waits beyond the owner's own timeout before giving up itself; the
 * owner keeps retrying its answer as long (Served).
 */
export const ORIGIN_GRACE_MS = 2_000;

export type Header =
  /**
   * A request for the phone this node's peer holds (its fields: src/bus/req-header.ts). `ph`: a
   * 2026-07-28 tools/call's `Mcp-Param-*` headers, which the origin could not check without the
   * phone's tool catalog; the owner checks them (src/gateway/tool-header-check.ts). Only on a
   * request without `b` (one JSON.stringify writes): req-header.ts's writer and reader never
   * see it, and a node that does not know it forwards the call unchecked, as before it existed.
   */
  | (ReqHeaderFields & { scopes: Scope[]; ph?: Record<string, string> })
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
 * A forwarded request (Header `b`) to start with handleClientBytes (its fields in
 * readClientRequest's order: one shape for both), or undefined if its
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
