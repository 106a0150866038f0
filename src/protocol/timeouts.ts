// How long the relay waits for the phone's answer (docs/PROTOCOL.md: 30 s; wait_for_events gets its
// own timeout_s + 15 s, capped at 615 s). The only fields of a request the relay reads.
// On 2026-07-28 a tool may declare its timeout as a tool header (x-mcp-header "Timeout", an
// integer of seconds): the relay sizes the call from the header, validated against the body
// beforehand (validateParamHeaders); otherwise the body decides (docs/decisions/0181-tool-headers.md).
// wait_for_events declares none: its timeout_s is a number, fractions allowed, which no header
// can carry (docs/decisions/0184-timeout-s-stays-a-number.md).
import { H_PARAM_PREFIX, decodeHeaderValue, type Headers } from './stateless.ts';
import { xMcpHeaders } from './tool-headers.ts';
export const DEFAULT_TIMEOUT_MS = 30_000;
export const LONG_POLL_GRACE_MS = 15_000;
export const MAX_TIMEOUT_MS = 615_000;

export function requestTimeoutMs(
  method: string,
  params: Record<string, unknown> | undefined,
  base = DEFAULT_TIMEOUT_MS,
): number {
  if (method !== 'tools/call' || !params || params.name !== 'wait_for_events') return base;
  const args = params.arguments as Record<string, unknown> | undefined;
  const t = args?.timeout_s;
  if (typeof t !== 'number' || !Number.isFinite(t) || t < 0) return base;
  return Math.min(t * 1000 + LONG_POLL_GRACE_MS, MAX_TIMEOUT_MS);
}

/** The JSON Schema keyword of a tool header (SEP-2243). */
export const X_MCP_HEADER = 'x-mcp-header';
/** The tool header that carries a call's own timeout, in whole seconds: `Mcp-Param-Timeout`. */
export const TIMEOUT_HEADER = 'Timeout';

/**
 * The timeout of a tools/call sized from its declared timeout header, or undefined when the tool
 * declares none, the request does not carry it, or it is not a whole number of seconds (then
 * the caller falls back to requestTimeoutMs). Call it after validateParamHeaders, which has
 * already refused a header that disagrees with the body.
 */
export function headerTimeoutMs(inputSchema: unknown, headers: Headers): number | undefined {
  const decl = xMcpHeaders(inputSchema);
  if (!decl.ok) return undefined;
  const p = decl.params.find((d) => d.header.toLowerCase() === TIMEOUT_HEADER.toLowerCase());
  if (!p || p.type !== 'integer') return undefined;
  const name = `${H_PARAM_PREFIX}${p.header.toLowerCase()}`;
  const raw = Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
  if (raw === undefined) return undefined;
  const decoded = decodeHeaderValue(raw.trim());
  if (!decoded.ok || decoded.value.trim() === '') return undefined;
  // Read as validateParamHeaders compared it (numerically: "120.0" is 120), so a header it let
  // through sizes the call, beyond the cap too, instead of falling back to the 30 s default.
  const seconds = Number(decoded.value);
  if (!Number.isInteger(seconds) || seconds < 0) return undefined;
  return Math.min(seconds * 1000 + LONG_POLL_GRACE_MS, MAX_TIMEOUT_MS);
}
