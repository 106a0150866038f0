// The OAuth 2.1 rules of the authorization server as pure functions: what a registration may
// contain, what an authorization request must carry, PKCE, and scope narrowing. No I/O here;
// src/hosted/oauth.ts applies them to requests.
import { Buffer } from 'node:buffer';
import { createHash, timingSafeEqual } from 'node:crypto';
import { SCOPES, type Scope } from '../store/types.ts';

export const ACCESS_TOKEN_TTL_MS = 3600_000;
export const REFRESH_TOKEN_TTL_MS = 30 * 24 * 3600_000;
export const AUTHORIZATION_CODE_TTL_MS = 5 * 60_000;
export const REGISTRATION_LIMIT = 10;
export const REGISTRATION_WINDOW_MS = 10 * 60_000;
const MAX_REDIRECT_URIS = 10;
const MAX_URI_LENGTH = 2_000;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** https anywhere, or http on a loopback host with any port (native clients, RFC 8252 §7.3). No fragments. */
export function redirectUriProblem(uri: unknown): string | undefined {
  if (typeof uri !== 'string' || uri.length === 0 || uri.length > MAX_URI_LENGTH) return 'must be a URL';
  // The URL parser drops tabs and newlines; the stored URI is matched exactly, so refuse them.
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (/[\u0000-\u0020\u007f]/.test(uri)) return 'must not contain spaces or control characters';
  // RFC 6749 §3.1.2: no fragment component, an empty one ("…/cb#") included, which the URL
  // parser reports as `hash === ''`; a '#' can only ever start the fragment.
  if (uri.includes('#')) return 'must not have a fragment';
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return 'must be an absolute URL';
  }
  if (u.username || u.password) return 'must not carry credentials';
  if (u.protocol === 'https:') return undefined;
  if (u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname)) return undefined;
  return 'must be https, or http on a loopback host (127.0.0.1, [::1], localhost)';
}

/** Whether a redirect URI lands on this computer (http on a loopback host): a native client. */
export function isLoopbackRedirect(u: URL): boolean {
  return LOOPBACK_HOSTS.has(u.hostname);
}

/**
 * What the consent page can say about who a client is: a registered client chose its name and
 * nothing vouches for it; a client whose id is a metadata document's URL is described by whoever
 * runs that host, which is something, but not a verification of who that is
 * (docs/decisions/0161-consent-that-names-where-the-code-goes.md, 0165-client-id-metadata-documents.md).
 */
export function clientTrust(client: { id: string }): string {
  return client.id.startsWith('https://') ? `metadata from ${new URL(client.id).host}` : 'unverified';
}

export interface RegistrationRequest {
  redirectUris: string[];
  clientName: string;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string; description: string };

/** RFC 7591 client metadata, as far as a public client needs it. */
export function parseRegistration(body: unknown): Parsed<RegistrationRequest> {
  const bad = (description: string) => ({ ok: false as const, error: 'invalid_client_metadata', description });
  if (typeof body !== 'object' || body === null) return bad('body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (!Array.isArray(b.redirect_uris) || b.redirect_uris.length === 0)
    return { ok: false, error: 'invalid_redirect_uri', description: 'redirect_uris must be a non-empty array' };
  if (b.redirect_uris.length > MAX_REDIRECT_URIS)
    return { ok: false, error: 'invalid_redirect_uri', description: `at most ${MAX_REDIRECT_URIS} redirect_uris` };
  for (const uri of b.redirect_uris) {
    const problem = redirectUriProblem(uri);
    if (problem) return { ok: false, error: 'invalid_redirect_uri', description: `redirect_uri ${problem}` };
  }
  if (b.grant_types !== undefined) {
    if (!Array.isArray(b.grant_types)) return bad('grant_types must be an array');
    for (const g of b.grant_types)
      if (g !== 'authorization_code' && g !== 'refresh_token') return bad(`grant type ${String(g)} is not supported`);
  }
  if (b.response_types !== undefined) {
    if (!Array.isArray(b.response_types) || b.response_types.some((t) => t !== 'code'))
      return bad('only the code response type is supported');
  }
  const rawName = typeof b.client_name === 'string' ? b.client_name.trim() : '';
  // Shown on the consent page: printable and short.
  // eslint-disable-next-line no-control-regex -- removing control characters is the point
  const clientName = rawName.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 100) || 'Unnamed client';
  return { ok: true, value: { redirectUris: b.redirect_uris as string[], clientName } };
}

/** base64url(SHA-256(verifier)), compared in constant time. Verifiers are 43–128 unreserved characters. */
export function verifierMatches(verifier: unknown, challenge: string): boolean {
  if (typeof verifier !== 'string' || !/^[A-Za-z0-9\-._~]{43,128}$/.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

/** Space-separated scopes; unknown ones are dropped. An absent or empty scope asks for every scope. */
export function requestedScopes(raw: string | null | undefined): Scope[] {
  if (!raw || !raw.trim()) return [...SCOPES];
  const asked = new Set(raw.split(/\s+/));
  return SCOPES.filter((s) => asked.has(s));
}

/** What the person ticked, never more than was requested (in the canonical order). */
export function grantedScopes(chosen: string[], requested: Scope[]): Scope[] {
  const c = new Set(chosen);
  return requested.filter((s) => c.has(s));
}

export interface AuthorizationRequest {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  state: string | null;
  scopes: Scope[];
  resource: string;
}

/**
 * Validates an authorization request's parameters. `redirect: false` problems (unknown client or
 * unregistered redirect URI) are shown on a page, never sent to the URI (an open redirector
 * otherwise); the rest go back to the client as `error=` on its redirect URI.
 */
export function checkAuthorizationRequest(
  p: URLSearchParams,
  client: { redirectUris: string[] } | undefined,
  mcpResource: string,
):
  | { ok: true; request: AuthorizationRequest }
  | { ok: false; redirect: false; description: string }
  | { ok: false; redirect: true; redirectUri: string; state: string | null; error: string; description: string } {
  const clientId = p.get('client_id') ?? '';
  const redirectUri = p.get('redirect_uri') ?? '';
  if (!client) return { ok: false, redirect: false, description: 'unknown client_id' };
  if (!client.redirectUris.includes(redirectUri))
    return { ok: false, redirect: false, description: 'redirect_uri is not registered for this client' };
  const state = p.get('state');
  const back = (error: string, description: string) => ({
    ok: false as const,
    redirect: true as const,
    redirectUri,
    state,
    error,
    description,
  });
  if (p.get('response_type') !== 'code') return back('unsupported_response_type', 'response_type must be code');
  const challenge = p.get('code_challenge');
  if (!challenge) return back('invalid_request', 'code_challenge is required (PKCE)');
  if (p.get('code_challenge_method') !== 'S256') return back('invalid_request', 'code_challenge_method must be S256');
  if (!/^[A-Za-z0-9_-]{43}$/.test(challenge))
    return back('invalid_request', 'code_challenge must be base64url SHA-256');
  if (p.get('resource') !== mcpResource) return back('invalid_target', `resource must be ${mcpResource}`);
  const scopes = requestedScopes(p.get('scope'));
  if (scopes.length === 0) return back('invalid_scope', `scopes are ${SCOPES.join(' ')}`);
  return {
    ok: true,
    request: { clientId, redirectUri, codeChallenge: challenge, state, scopes, resource: mcpResource },
  };
}

/** The client's redirect URI with the response parameters appended (its own query kept). */
export function redirectWith(redirectUri: string, params: Record<string, string | null>): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== null) u.searchParams.set(k, v);
  return u.toString();
}
