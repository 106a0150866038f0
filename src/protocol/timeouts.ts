// How long the relay waits for the phone's answer (docs/PROTOCOL.md: 30 s; wait_for_events gets its
// own timeout_s + 15 s, capped at 615 s). The only fields of a request the relay reads.
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
