// A 2026-07-28 tools/call's tool headers (`Mcp-Param-*`, SEP-2243) are checked against the body,
// and size the call's timeout, where the phone's tool catalog is: the declarations are in the
// tool's inputSchema (src/protocol/tool-headers.ts, src/protocol/timeouts.ts headerTimeoutMs;
// docs/decisions/0181-tool-headers.md). The /mcp endpoint (mcp-stateless.ts) does it at once when
// this node holds the catalog. Otherwise the request carries its `Mcp-Param-*` headers
// (Caller.toolHeaders; across the bus the `req` header's `ph`, node-messages.ts) to wherever it
// starts on the phone — this node once the phone is ready (router.ts `route`), or the node
// holding it (served-requests.ts) — which runs the same check before the phone sees the call: a
// refusal is the same 400 / -32020 whichever node the client reached (docs/PROTOCOL.md,
// "Revision 2026-07-28 (stateless)").
import type { JsonRpcErrorObject } from '../protocol/errors.ts';
import { H_PARAM_PREFIX, type Headers } from '../protocol/stateless.ts';
import type { ToolCatalog } from '../protocol/scopes.ts';
import { validateParamHeaders } from '../protocol/tool-headers.ts';
import {
  headerTimeoutMs,
  requestTimeoutMs,
  TIMEOUT_HEADER,
  TIMEOUT_MS_HEADER,
  X_MCP_HEADER,
} from '../protocol/timeouts.ts';
import { startsWith } from '../protocol/string-builtins.ts';

/** A request's `Mcp-Param-*` headers, names lower-cased as collectHeaders keeps them (mcp-headers.ts). */
export function paramHeaders(h: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in h) {
    const v = h[k];
    if (v !== undefined && startsWith.call(k, H_PARAM_PREFIX)) out[k] = v;
  }
  return out;
}

// The two timeout headers as a tool would declare them, to read a request's headers as if its
// tool did (provisionalTimeoutMs).
const DECLARES_TIMEOUT = { properties: { t: { type: 'integer', [X_MCP_HEADER]: TIMEOUT_HEADER } } };
const DECLARES_TIMEOUT_MS = { properties: { t: { type: 'integer', [X_MCP_HEADER]: TIMEOUT_MS_HEADER } } };
// Their names as collectHeaders keeps them (lower case).
const TIMEOUT_NAME = `${H_PARAM_PREFIX}${TIMEOUT_HEADER.toLowerCase()}`;
const TIMEOUT_MS_NAME = `${H_PARAM_PREFIX}${TIMEOUT_MS_HEADER.toLowerCase()}`;

/**
 * The timeout of a tools/call this node cannot size (it has no catalog to read the tool's
 * declarations in): the longest the call may be given where it is checked — its
 * `Mcp-Param-Timeout` / `-Timeout-Ms` read as if declared, or the body's size if longer — so
 * that this node waits for the answer at least as long as the node that sizes it
 * (checkToolHeaders). Undefined when the request carries neither header (the body decides).
 */
export function provisionalTimeoutMs(
  headers: Headers,
  method: string,
  params: Record<string, unknown> | undefined,
  baseMs: number,
): number | undefined {
  if (headers[TIMEOUT_NAME] === undefined && headers[TIMEOUT_MS_NAME] === undefined) return undefined;
  const s = headerTimeoutMs(DECLARES_TIMEOUT, headers);
  const ms = headerTimeoutMs(DECLARES_TIMEOUT_MS, headers);
  if (s === undefined && ms === undefined) return undefined;
  return Math.max(s ?? 0, ms ?? 0, requestTimeoutMs(method, params, baseMs));
}

/**
 * A tools/call that reached the phone's catalog unchecked (`headers`: its `Mcp-Param-*`
 * headers): the refusal mcp-stateless.ts would have made (400 / -32020), or its timeout —
 * sized from its declared timeout header, else from the body (`baseMs`: --request-timeout-ms),
 * never past `givenMs`, what is left of the origin's provisionalTimeoutMs. A tool the catalog
 * does not know is the phone's to refuse.
 */
export function checkToolHeaders(
  tools: ToolCatalog | undefined,
  method: string,
  params: Record<string, unknown> | undefined,
  headers: Headers,
  givenMs: number,
  baseMs: number,
): { error: JsonRpcErrorObject } | { timeoutMs: number } {
  const tool = method === 'tools/call' ? tools?.byName.get(String(params?.name)) : undefined;
  if (!tool) return { timeoutMs: givenMs };
  const p = validateParamHeaders(tool.inputSchema, headers, params?.arguments);
  if (!p.ok) return { error: p.error };
  const sized = headerTimeoutMs(tool.inputSchema, headers) ?? requestTimeoutMs(method, params, baseMs);
  return { timeoutMs: Math.min(givenMs, sized) };
}
