// JSON-RPC 2.0 shapes and the checks the relay applies to what clients send.
import { JsonNumberText, parseJson, stringifyJson } from './exact-json.ts';
import { INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, type JsonRpcErrorObject } from './errors.ts';

export type JsonRpcId = string | number;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: Record<string, unknown>;
}
export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown>;
}
export interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: JsonRpcId | null;
  result?: unknown;
  error?: JsonRpcErrorObject;
}
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

export type Classified =
  | { kind: 'request'; msg: JsonRpcRequest }
  | { kind: 'notification'; msg: JsonRpcNotification }
  | { kind: 'response'; msg: JsonRpcResponse }
  | { kind: 'invalid'; id: JsonRpcId | null; error: JsonRpcErrorObject };

// MCP ids are strings or integers. Past 2^53 - 1 an integer is not the number JSON.parse gives
// back, so its answer would carry another id: refused, as the MCP SDK's schema does.
function isId(v: unknown): v is JsonRpcId {
  return typeof v === 'string' || Number.isSafeInteger(v);
}

export function classify(value: unknown): Classified {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return {
      kind: 'invalid',
      id: null,
      error: { code: INVALID_REQUEST, message: 'Invalid Request: expected a JSON-RPC object' },
    };
  }
  const m = value as Record<string, unknown>;
  const id = isId(m.id) ? m.id : null;
  if (m.jsonrpc !== '2.0')
    return { kind: 'invalid', id, error: { code: INVALID_REQUEST, message: 'Invalid Request: jsonrpc must be "2.0"' } };
  if (m.params !== undefined && (typeof m.params !== 'object' || m.params === null || Array.isArray(m.params))) {
    return {
      kind: 'invalid',
      id,
      error: { code: INVALID_REQUEST, message: 'Invalid Request: params must be an object' },
    };
  }
  if (typeof m.method === 'string') {
    if (m.id === undefined) return { kind: 'notification', msg: m as unknown as JsonRpcNotification };
    if (!isId(m.id))
      return {
        kind: 'invalid',
        id: null,
        error: {
          code: INVALID_REQUEST,
          message: 'Invalid Request: id must be a string or an integer within ±(2^53 - 1)',
        },
      };
    return { kind: 'request', msg: m as unknown as JsonRpcRequest };
  }
  if ('result' in m || 'error' in m) {
    if (!isId(m.id) && m.id !== null)
      return {
        kind: 'invalid',
        id: null,
        error: { code: INVALID_REQUEST, message: 'Invalid Request: bad response id' },
      };
    return { kind: 'response', msg: m as unknown as JsonRpcResponse };
  }
  return {
    kind: 'invalid',
    id,
    error: { code: INVALID_REQUEST, message: 'Invalid Request: no method, result or error' },
  };
}

const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/**
 * classify() for what a client sends: a request whose `_meta` breaks the MCP schema where an
 * MCP server checks it (`progressToken` a string or a number, `related-task` an object with a
 * string `taskId`) is -32602 with its id. The SDK drops such a frame without an answer, so
 * forwarded it would cost the client a timeout. A `_meta` that is not an object is no such
 * case: the relay writes its own (the caller context, src/protocol/caller.ts).
 */
export function classifyClientMessage(value: unknown): Classified {
  const c = classify(value);
  if (c.kind !== 'request') return c;
  const meta = c.msg.params?._meta;
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return c;
  const m = meta as Record<string, unknown>;
  const bad = (message: string): Classified => ({
    kind: 'invalid',
    id: c.msg.id,
    error: { code: INVALID_PARAMS, message: `Invalid params: params._meta.${message}` },
  });
  const token = m.progressToken;
  // A number no double holds is kept as written, and the phone's progress carries it back so.
  if (
    token !== undefined &&
    typeof token !== 'string' &&
    typeof token !== 'number' &&
    !(token instanceof JsonNumberText)
  )
    return bad('progressToken must be a string or a number');
  const related = m[RELATED_TASK];
  if (
    related !== undefined &&
    (typeof related !== 'object' || related === null || typeof (related as Record<string, unknown>).taskId !== 'string')
  )
    return bad(`["${RELATED_TASK}"] must be an object with a string taskId`);
  return c;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Parses a client body: one message or (for 2025-03-26) a batch. Bytes that are not UTF-8 are
 * no JSON text (RFC 8259 §8.1): refused, not read with U+FFFD in their place. Numbers a double
 * does not hold are kept as written (src/protocol/exact-json.ts).
 */
export function parseBody(raw: Uint8Array): { ok: true; value: unknown } | { ok: false; error: JsonRpcErrorObject } {
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    return { ok: false, error: { code: PARSE_ERROR, message: 'Parse error: body is not valid UTF-8' } };
  }
  try {
    return { ok: true, value: parseJson(text) };
  } catch {
    return { ok: false, error: { code: PARSE_ERROR, message: 'Parse error: body is not valid JSON' } };
  }
}

export function errorResponse(id: JsonRpcId | JsonNumberText | null, error: JsonRpcErrorObject): string {
  return stringifyJson({ jsonrpc: '2.0', id, error });
}

/**
 * A request whose id is a number no double holds exactly (src/protocol/exact-json.ts), which
 * classify() calls invalid: the phone's to number as it likes, answered under that id as written.
 */
export function inexactlyNumbered(value: unknown): { id: JsonNumberText; method: string } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const m = value as Record<string, unknown>;
  return m.jsonrpc === '2.0' && typeof m.method === 'string' && m.id instanceof JsonNumberText
    ? { id: m.id, method: m.method }
    : undefined;
}

/** A result as given: a cached surface may hold numbers kept as written (src/protocol/exact-json.ts). */
export function resultResponse(id: JsonRpcId | JsonNumberText | null, result: unknown): string {
  return stringifyJson({ jsonrpc: '2.0', id, result });
}

/**
 * A request whose id is that of a request still in flight in its session: MCP has ids unique
 * within a session, and the relay could not tell the two apart in the client's
 * notifications/cancelled (docs/decisions/0216-duplicate-request-ids.md).
 */
export function duplicateRequestId(id: JsonRpcId): JsonRpcErrorObject {
  return {
    code: INVALID_REQUEST,
    message: `Invalid Request: id ${JSON.stringify(id)} is already in use by a request in flight in this session; request ids must be unique within a session`,
  };
}
