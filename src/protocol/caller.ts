// Every forwarded request (and notification) tells the phone who is calling. Any value a client
// put under the same key is replaced, never merged (docs/decisions/0006-caller-context.md).
import { Buffer } from 'node:buffer';
import type { Token } from '../store/types.ts';

export const CALLER_META_KEY = 'phonebridge/caller';

/**
 * What the relay sends the phone when a credential it saw in the caller context is revoked
 * (docs/PROTOCOL.md, docs/decisions/0162-a-caller-is-its-grant.md): params `{credential}`.
 */
export const CREDENTIAL_REVOKED_METHOD = 'notifications/phonebridge/credential_revoked';

type CallerToken = Pick<Token, 'id' | 'scopes'> & { grantId?: string | null };

/**
 * The caller's id as the phone sees it: an OAuth access token's grant (stable across refreshes,
 * so leases and idempotency keys survive them), otherwise the token (an API key) itself.
 */
export function callerCredential(token: CallerToken): string {
  return token.grantId ?? token.id;
}

export function withCallerContext(
  params: Record<string, unknown> | undefined,
  token: CallerToken,
): Record<string, unknown> {
  const p = params ?? {};
  const meta =
    p._meta && typeof p._meta === 'object' && !Array.isArray(p._meta) ? (p._meta as Record<string, unknown>) : {};
  return {
    ...p,
    _meta: { ...meta, [CALLER_META_KEY]: { credential: callerCredential(token), scopes: [...token.scopes] } },
  };
}

const callerJson = new WeakMap<CallerToken, Buffer>();

/**
 * The caller context as JSON bytes, for frames built from a request's own bytes
 * (src/protocol/request-bytes.ts): encoded once per credential, not per call.
 */
export function callerContextJson(token: CallerToken): Buffer {
  let b = callerJson.get(token);
  if (!b)
    callerJson.set(
      token,
      (b = Buffer.from(JSON.stringify({ credential: callerCredential(token), scopes: [...token.scopes] }))),
    );
  return b;
}
