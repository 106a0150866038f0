// The browser-facing rules of hosted mode in one place: cookies, the CSRF token, the same-origin
// check, the strict CSP, and HTML escaping. Pages are server-rendered; no inline script or style.
import { Buffer } from 'node:buffer';
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Headers } from '../gateway/http.ts';

export const SESSION_COOKIE = 'pb_session';
export const CSRF_COOKIE = 'pb_csrf';
/** Set by the browser that asked for a sign-in link: only there does the link keep its `next`. */
export const SIGNIN_BROWSER_COOKIE = 'pb_signin';
export const SESSION_TTL_MS = 7 * 24 * 3600_000;

/** Request headers a hosted page handler copies before any await. */
export const PAGE_HEADERS = ['cookie', 'origin', 'sec-fetch-site', 'content-type', 'x-forwarded-for'] as const;

export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  // The pairing page's watcher polls /account/phones.json.
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export function pageHeaders(extra: Headers = {}): Headers {
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy': CSP,
    'X-Content-Type-Options': 'nosniff',
    // same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" on form posts.
    'Referrer-Policy': 'same-origin',
    'Cache-Control': 'no-store',
    ...extra,
  };
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    const k = part.slice(0, i).trim();
    if (!(k in out)) out[k] = part.slice(i + 1).trim();
  }
  return out;
}

/**
 * On https every cookie is `__Host-` prefixed (Secure, Path=/, no Domain): a sibling subdomain
 * cannot set or shadow it (docs/decisions/0167-host-cookies-and-account-switch.md).
 */
export const HOST_PREFIX = '__Host-';

/**
 * The cookies a request carries, under their plain names. On https only `__Host-` cookies count:
 * a plain `pb_session` there may have been planted by a sibling subdomain.
 */
export function requestCookies(header: string | undefined, secure: boolean): Record<string, string> {
  const all = parseCookies(header);
  if (!secure) return all;
  const out: Record<string, string> = {};
  for (const k in all) if (k.startsWith(HOST_PREFIX)) out[k.slice(HOST_PREFIX.length)] = all[k];
  return out;
}

/** HttpOnly, SameSite=Lax, Path=/; Secure and `__Host-` when the relay's public URL is https. */
export function setCookie(name: string, value: string, opts: { secure: boolean; maxAgeS?: number }): string {
  const parts = [`${opts.secure ? HOST_PREFIX : ''}${name}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (opts.secure) parts.push('Secure');
  if (opts.maxAgeS !== undefined) parts.push(`Max-Age=${opts.maxAgeS}`);
  return parts.join('; ');
}

/**
 * A value only the browser that holds this session can have a node read back: AES-256-GCM under a
 * key derived (HKDF) from the session cookie itself, which every node sees on the request and none
 * stores (the store keeps its hash). No key to share across nodes, nothing kept in a node's memory
 * (docs/decisions/0253-key-created-page-after-a-redirect.md). `purpose` separates the uses.
 */
export function seal(session: string, purpose: string, value: unknown, ttlMs: number): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', sealingKey(session, purpose), iv);
  const body = Buffer.concat([c.update(JSON.stringify({ v: value, exp: Date.now() + ttlMs }), 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), body]).toString('base64url');
}

/** What `seal` sealed under this session and purpose, unless it expired or was altered. */
export function unseal(session: string, purpose: string, sealed: string): unknown {
  try {
    const raw = Buffer.from(sealed, 'base64url');
    if (raw.length < 29) return undefined;
    const d = createDecipheriv('aes-256-gcm', sealingKey(session, purpose), raw.subarray(0, 12));
    d.setAuthTag(raw.subarray(12, 28));
    const text = Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
    const { v, exp } = JSON.parse(text) as { v: unknown; exp: number };
    return typeof exp === 'number' && exp > Date.now() ? v : undefined;
  } catch {
    // Another session's, altered, or not ours at all: nothing to read.
    return undefined;
  }
}

const sealingKey = (session: string, purpose: string) =>
  Buffer.from(hkdfSync('sha256', session, '', `phonebridge seal:${purpose}`, 32));

export const newSecret = () => randomBytes(32).toString('base64url');
export const hashSecret = (kind: string, value: string) =>
  createHash('sha256').update(`${kind}:${value}`, 'utf8').digest('hex');

/**
 * The CSRF token a page embeds and a POST must return. Signed in: derived from the session
 * cookie (bound to the session). Before sign-in: a random cookie (double submit).
 */
export function csrfToken(cookies: Record<string, string>): string | undefined {
  const session = cookies[SESSION_COOKIE];
  if (session) return createHash('sha256').update(`csrf:${session}`).digest('base64url');
  return cookies[CSRF_COOKIE] || undefined;
}

export function csrfMatches(cookies: Record<string, string>, presented: string | null): boolean {
  const expected = csrfToken(cookies);
  if (!expected || !presented) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A state change must come from a page of this relay: Origin equal to ours, or (a browser
 * that sends no Origin) Sec-Fetch-Site same-origin. Neither header: refused.
 */
export function sameOrigin(headers: Record<string, string>, origin: string): boolean {
  if (headers.origin) return headers.origin === origin;
  return headers['sec-fetch-site'] === 'same-origin';
}

/** A place to go after sign-in: a path under /account on this relay, never another site. */
export function safeNext(raw: string | null | undefined): string {
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (!raw || !raw.startsWith('/account') || raw.startsWith('//') || /[\\\u0000-\u001f\u007f]/.test(raw))
    return '/account';
  return raw.slice(0, 4_000);
}

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export function esc(value: unknown): string {
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- callers pass strings and numbers; anything else is a bug shown escaped
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESC[c]);
}

export function layout(
  title: string,
  body: string,
  opts: { signedIn?: string; csrf?: string; head?: string } = {},
): string {
  const signout =
    opts.signedIn && opts.csrf
      ? `<form method="post" action="/account/signout" class="signout"><span>${esc(opts.signedIn)}</span>` +
        `<input type="hidden" name="csrf" value="${esc(opts.csrf)}"><button type="submit">Sign out</button></form>`
      : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · phonebridge</title><link rel="icon" href="/account/assets/icon.svg" type="image/svg+xml"><link rel="stylesheet" href="/account/assets/style.css">${opts.head ?? ''}</head>
<body><header><a href="/account" class="brand">phonebridge</a>${signout}</header><main>
<h1>${esc(title)}</h1>
${body}
</main></body></html>`;
}

export function hidden(name: string, value: string | null | undefined): string {
  return value === null || value === undefined ? '' : `<input type="hidden" name="${esc(name)}" value="${esc(value)}">`;
}
