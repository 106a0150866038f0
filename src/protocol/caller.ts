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
