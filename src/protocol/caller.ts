// Every forwarded request (and notification) tells the phone who is calling. Any value a client
// put under the same key is replaced, never merged (docs/decisions/0006-caller-context.md).
import type { Token } from '../store/types.ts';

export const CALLER_META_KEY = 'phonebridge/caller';

export function withCallerContext(
  params: Record<string, unknown> | undefined,
  token: Pick<Token, 'id' | 'scopes'>,
): Record<string, unknown> {
  const p = params ?? {};
  const meta =
    p._meta && typeof p._meta === 'object' && !Array.isArray(p._meta) ? (p._meta as Record<string, unknown>) : {};
  return { ...p, _meta: { ...meta, [CALLER_META_KEY]: { credential: token.id, scopes: [...token.scopes] } } };
}

const callerJson = new WeakMap<Pick<Token, 'id' | 'scopes'>, Buffer>();

/**
 * The caller context as JSON bytes, for frames built from a request's own bytes
 * (src/protocol/request-bytes.ts): encoded once per credential, not per call.
 */
export function callerContextJson(token: Pick<Token, 'id' | 'scopes'>): Buffer {
  let b = callerJson.get(token);
  if (!b) callerJson.set(token, (b = Buffer.from(JSON.stringify({ credential: token.id, scopes: [...token.scopes] }))));
  return b;
}
