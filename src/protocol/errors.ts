// Relay error codes: outside JSON-RPC's reserved range (-32768..-32000), with a
// stable string in error.data.code (docs/decisions/0008-relay-error-codes.md). The table is mirrored
// in docs/PROTOCOL.md.

export const RELAY_ERRORS = {
  relay_error: { code: -31000, message: 'The relay failed to handle the request' },
  device_offline: { code: -31001, message: 'The phone is not connected to the relay' },
  timeout: { code: -31002, message: 'The phone did not answer in time' },
  too_large: { code: -31003, message: 'The message exceeds the 256 KiB frame limit' },
  relay_unavailable: { code: -31004, message: 'The relay cannot reach the node that holds the phone' },
  cancelled: { code: -31005, message: 'The request was cancelled' },
  device_removed: { code: -31006, message: 'The phone was removed' },
  superseded: { code: -31007, message: 'The phone reconnected; requests on the old socket were dropped' },
  insufficient_scope: { code: -31008, message: 'The credential lacks the scope this request needs' },
  device_busy: { code: -31009, message: 'Too many requests are in flight for this phone' },
} as const;

export type RelayErrorName = keyof typeof RELAY_ERRORS;

// Standard JSON-RPC codes the relay uses itself.
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export function relayError(name: RelayErrorName, detail?: string): JsonRpcErrorObject {
  const e = RELAY_ERRORS[name];
  return { code: e.code, message: detail ? `${e.message}: ${detail}` : e.message, data: { code: name } };
}
