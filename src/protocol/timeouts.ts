// How long the relay waits for the phone's answer (docs/PROTOCOL.md: 30 s; wait_for_events gets its
// own wait + 15 s, capped at 615 s). The only fields of a request the relay reads.
// wait_for_events names its wait as `timeout_s` (seconds, fractions allowed: the published
// number, which no tool header can carry: docs/decisions/0184-timeout-s-stays-a-number.md) or,
// since surface 2026.12.03, `timeout_ms` (whole milliseconds), which it declares as the tool
// header `Timeout-Ms` (docs/decisions/0212-timeout-ms-tool-header.md).
// On 2026-07-28 any tool may declare its timeout as a tool header (x-mcp-header "Timeout", whole
// seconds, or "Timeout-Ms", whole milliseconds): the relay sizes the call from the header,
// validated against the body beforehand (validateParamHeaders); otherwise the body decides
// (docs/decisions/0181-tool-headers.md).
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
  const wait = waitSeconds(args?.timeout_s, args?.timeout_ms);
  return wait === undefined ? base : Math.min(wait * 1000 + LONG_POLL_GRACE_MS, MAX_TIMEOUT_MS);
}

/**
 * wait_for_events' wait in seconds from its `timeout_s` (seconds) or `timeout_ms` (milliseconds),
 * or undefined when neither is a usable number. With both (the phone refuses that call), the
 * longer: the relay never cuts a wait short of what either names.
 */
export function waitSeconds(timeoutS: unknown, timeoutMs: unknown): number | undefined {
  const fromS = typeof timeoutS === 'number' && Number.isFinite(timeoutS) && timeoutS >= 0 ? timeoutS : -1;
  const fromMs = typeof timeoutMs === 'number' && Number.isFinite(timeoutMs) && timeoutMs >= 0 ? timeoutMs / 1000 : -1;
  const wait = Math.max(fromS, fromMs);
  return wait < 0 ? undefined : wait;
}

/** The JSON Schema keyword of a tool header (SEP-2243). */
export const X_MCP_HEADER = 'x-mcp-header';
/** The tool headers that carry a call's own timeout, by unit: `Mcp-Param-Timeout` in whole seconds, `Mcp-Param-Timeout-Ms` in whole milliseconds. */
export const TIMEOUT_HEADER = 'Timeout';
export const TIMEOUT_MS_HEADER = 'Timeout-Ms';
const MS_PER_UNIT = new Map([
  [TIMEOUT_HEADER.toLowerCase(), 1000],
  [TIMEOUT_MS_HEADER.toLowerCase(), 1],
]);

/**
 * The timeout of a tools/call sized from its declared timeout header (`Timeout` or `Timeout-Ms`
 * on an integer; a tool declaring both is sized by the first in its schema), or undefined when the tool
 * declares none, the request does not carry it, or it is not a whole number (then the caller
 * falls back to requestTimeoutMs). Call it after validateParamHeaders, which has
 * already refused a header that disagrees with the body.
 */
export function headerTimeoutMs(inputSchema: unknown, headers: Headers): number | undefined {
  const decl = xMcpHeaders(inputSchema);
  if (!decl.ok) return undefined;
  const p = decl.params.find((d) => d.type === 'integer' && MS_PER_UNIT.has(d.header.toLowerCase()));
  if (!p) return undefined;
  const msPerUnit = MS_PER_UNIT.get(p.header.toLowerCase())!;
  const name = `${H_PARAM_PREFIX}${p.header.toLowerCase()}`;
  const raw = Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
  if (raw === undefined) return undefined;
  const decoded = decodeHeaderValue(raw.trim());
  if (!decoded.ok || decoded.value.trim() === '') return undefined;
  // Read as validateParamHeaders compared it (numerically: "120.0" is 120), so a header it let
  // through sizes the call, beyond the cap too, instead of falling back to the 30 s default.
  const units = Number(decoded.value);
  if (!Number.isInteger(units) || units < 0) return undefined;
  return Math.min(units * msPerUnit + LONG_POLL_GRACE_MS, MAX_TIMEOUT_MS);
}
