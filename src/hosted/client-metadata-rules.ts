// Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document-00, MCP
// authorization 2025-11-25) as pure rules: which URL may be a client_id, which address the relay
// may connect to for it, how long a fetched document is kept, and what a document must contain.
// The fetch itself (resolve once, check, connect to that address) is src/hosted/client-metadata.ts
// (docs/decisions/0165-client-id-metadata-documents.md).
import { isIP } from 'node:net';
import { parseRegistration, type Parsed } from './oauth-rules.ts';

/** The document's size limit (draft §6.6 recommends 5 kilobytes). */
export const MAX_DOCUMENT_BYTES = 5 * 1024;
/** The whole fetch — connect, TLS, headers and body — within this. */
export const FETCH_TIMEOUT_MS = 5_000;
/** Cache bounds: a document is kept at least this long, whatever its headers say… */
export const MIN_CACHE_MS = 60_000;
/** …and at most this long, so a changed document (a redirect URI removed) takes effect within it. */
export const MAX_CACHE_MS = 3_600_000;
/** Documents fetched (cache misses) per client address and window: the fetch is triggered anonymously. */
export const FETCH_LIMIT = 20;
export const FETCH_WINDOW_MS = 10 * 60_000;
const MAX_URL_LENGTH = 2_000;

/** Whether a client_id names a metadata document (anything else is a registered client's id). */
export function isMetadataClientId(clientId: string): boolean {
  return clientId.startsWith('https://');
}

/**
 * What is wrong with a client_id URL, or undefined (draft §3): https, a path, no dot segments,
 * no fragment, no user or password; and here also no query (the draft says SHOULD NOT) and the
 * URL exactly as the WHATWG parser writes it, so the document's client_id is compared with one
 * spelling only. `localhost` names are refused by name; every other host is judged by the
 * addresses it resolves to (classifyAddress).
 */
export function clientIdUrlProblem(raw: string): string | undefined {
  if (raw.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`;
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (/[\u0000-\u0020\u007f]/.test(raw)) return 'must not contain spaces or control characters';
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'must be an absolute URL';
  }
  if (u.protocol !== 'https:') return 'must be an https URL';
  if (u.username || u.password) return 'must not carry a user or password';
  if (raw.includes('#')) return 'must not have a fragment';
  if (u.search || raw.includes('?')) return 'must not have a query';
  const path = raw.slice(raw.indexOf('/', 'https://'.length));
  if (path.split('/').some((s) => /^(\.|%2e){1,2}$/i.test(s))) return 'must not contain . or .. path segments';
  if (u.pathname === '/' || raw.indexOf('/', 'https://'.length) < 0) return 'must have a path (e.g. /client.json)';
  const host = u.hostname.toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return 'must not name localhost';
  if (u.href !== raw) return `must be written in normal form (${u.href})`;
  return undefined;
}

/** The URL's host as an address or a name to resolve (IPv6 literals without their brackets). */
export function hostOf(url: string): string {
  const h = new URL(url).hostname;
  return h.startsWith('[') ? h.slice(1, -1) : h;
}

// --- Addresses -----------------------------------------------------------------------------

type Range = readonly [prefix: number[], bits: number, name: string];

/**
 * IPv4 ranges the relay never connects to for a client (IANA IPv4 Special-Purpose Address
 * Registry, plus multicast and the reserved class E). Everything else is public.
 */
const V4_REFUSED: Range[] = [
  [[0, 0, 0, 0], 8, 'this network (0/8, includes the unspecified address)'],
  [[10, 0, 0, 0], 8, 'private (RFC 1918)'],
  [[100, 64, 0, 0], 10, 'shared address space (CGNAT, RFC 6598)'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link-local'],
  [[172, 16, 0, 0], 12, 'private (RFC 1918)'],
  [[192, 0, 0, 0], 24, 'IETF protocol assignments'],
  [[192, 0, 2, 0], 24, 'documentation (TEST-NET-1)'],
  [[192, 88, 99, 0], 24, '6to4 relay anycast (deprecated)'],
  [[192, 168, 0, 0], 16, 'private (RFC 1918)'],
  [[198, 18, 0, 0], 15, 'benchmarking'],
  [[198, 51, 100, 0], 24, 'documentation (TEST-NET-2)'],
  [[203, 0, 113, 0], 24, 'documentation (TEST-NET-3)'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[240, 0, 0, 0], 4, 'reserved (includes broadcast)'],
];

/**
 * IPv6 ranges refused inside global unicast (2000::/3); everything outside 2000::/3 is refused
 * too (unspecified, loopback, ULA, link-local, multicast, discard, unallocated), except the two
 * prefixes that carry an IPv4 address, which are judged by that address.
 */
const V6_REFUSED: Range[] = [
  [[0x20, 0x01, 0x0d, 0xb8], 32, 'documentation (2001:db8::/32)'],
  [[0x20, 0x01, 0x00, 0x00], 23, 'IETF protocol assignments (2001::/23, includes Teredo)'],
  [[0x20, 0x02], 16, '6to4 (2002::/16)'],
  [[0x3f, 0xff], 20, 'documentation (3fff::/20)'],
];

const V6_OUTSIDE: Range[] = [
  [new Array<number>(16).fill(0), 128, 'unspecified (::)'],
  [[...new Array<number>(15).fill(0), 1], 128, 'loopback (::1)'],
  [[0xfc], 7, 'unique local (fc00::/7)'],
  [[0xfe, 0x80], 10, 'link-local (fe80::/10)'],
  [[0xfe, 0xc0], 10, 'site-local (fec0::/10, deprecated)'],
  [[0xff], 8, 'multicast'],
  [[0x01, 0x00, 0, 0, 0, 0, 0, 0], 64, 'discard-only (100::/64)'],
  [[0x00, 0x64, 0xff, 0x9b, 0x00, 0x01], 48, 'local-use NAT64 (64:ff9b:1::/48)'],
];

function inRange(bytes: number[], [prefix, bits]: Range): boolean {
  for (let i = 0; i * 8 < bits; i++) {
    const take = Math.min(8, bits - i * 8);
    const mask = (0xff << (8 - take)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

function v4Bytes(a: string): number[] {
  return a.split('.').map(Number);
}

/** 16 bytes of an IPv6 address (`isIP` has accepted it; no zone id). */
function v6Bytes(a: string): number[] {
  let text = a;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    tail.push(...v4Bytes(dotted[1]));
    text = text.slice(0, -dotted[1].length) + '0:0';
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined];
  const words = (s: string | undefined) => (s ? s.split(':').filter((w) => w !== '') : []);
  const h = words(head);
  const r = words(rest);
  const all = rest === undefined ? h : [...h, ...new Array<string>(8 - h.length - r.length).fill('0'), ...r];
  const bytes = all.flatMap((w) => {
    const n = parseInt(w, 16);
    return [n >> 8, n & 0xff];
  });
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

export type AddressVerdict = { ok: true } | { ok: false; reason: string };

/**
 * Whether the relay may connect to this address to fetch a client's document: public unicast
 * only. IPv4-mapped (::ffff:0:0/96) and NAT64 (64:ff9b::/96) addresses are judged by the IPv4
 * address they carry; other IPv4-embedding forms (compatible, 6to4, Teredo) are refused.
 */
export function classifyAddress(address: string): AddressVerdict {
  if (address.includes('%')) return { ok: false, reason: 'an address with a zone (link-local scope)' };
  const family = isIP(address);
  if (family === 4) {
    const b = v4Bytes(address);
    const hit = V4_REFUSED.find((r) => inRange(b, r));
    return hit ? { ok: false, reason: hit[2] } : { ok: true };
  }
  if (family !== 6) return { ok: false, reason: 'not an IP address' };
  const b = v6Bytes(address);
  const embedded = b.slice(12).join('.');
  if (inRange(b, [[...new Array<number>(10).fill(0), 0xff, 0xff], 96, ''])) {
    const v = classifyAddress(embedded);
    return v.ok ? v : { ok: false, reason: `IPv4-mapped ${v.reason}` };
  }
  if (inRange(b, [[0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96, ''])) {
    const v = classifyAddress(embedded);
    return v.ok ? v : { ok: false, reason: `NAT64 of ${v.reason}` };
  }
  const outside = V6_OUTSIDE.find((r) => inRange(b, r));
  if (outside) return { ok: false, reason: outside[2] };
  if (!inRange(b, [[0x20], 3, ''])) return { ok: false, reason: 'not global unicast (outside 2000::/3)' };
  const hit = V6_REFUSED.find((r) => inRange(b, r));
  return hit ? { ok: false, reason: hit[2] } : { ok: true };
}

// --- Caching -------------------------------------------------------------------------------

/**
 * How long a fetched document is kept: the response's `Cache-Control: max-age` (or `Expires`
 * against `Date`), clamped to [MIN_CACHE_MS, MAX_CACHE_MS]. `no-store`, `no-cache`, a zero or
 * absent lifetime: the minimum. The minimum is a floor on how often one URL makes the relay
 * fetch; the maximum bounds how long a withdrawn document still works.
 */
export function cacheLifetimeMs(headers: { cacheControl?: string; expires?: string; date?: string }): number {
  const clamp = (ms: number) => Math.min(MAX_CACHE_MS, Math.max(MIN_CACHE_MS, ms));
  const cc = (headers.cacheControl ?? '').toLowerCase();
  const directives = new Map(
    cc
      .split(',')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => {
        const i = d.indexOf('=');
        return i < 0
          ? [d, '']
          : [
              d.slice(0, i).trim(),
              d
                .slice(i + 1)
                .trim()
                .replace(/^"|"$/g, ''),
            ];
      }),
  );
  if (directives.has('no-store') || directives.has('no-cache')) return MIN_CACHE_MS;
  const maxAge = directives.get('max-age');
  if (maxAge !== undefined) return /^\d+$/.test(maxAge) ? clamp(Number(maxAge) * 1000) : MIN_CACHE_MS;
  if (headers.expires) {
    const expires = Date.parse(headers.expires);
    const date = headers.date ? Date.parse(headers.date) : Date.now();
    if (Number.isFinite(expires) && Number.isFinite(date)) return clamp(expires - date);
    return MIN_CACHE_MS; // an invalid Expires means "already expired" (RFC 9111 §5.3)
  }
  return MIN_CACHE_MS;
}

// --- The document --------------------------------------------------------------------------

export interface ClientMetadata {
  clientId: string;
  clientName: string;
  redirectUris: string[];
}

/**
 * A fetched document as this relay accepts it: a JSON object whose `client_id` equals the URL it
 * was fetched from (simple string comparison), with a `client_name` and `redirect_uris` that
 * pass the same rules as a registration; a public client (no secret, `token_endpoint_auth_method`
 * absent or `none`: this relay has no client authentication).
 */
export function parseClientMetadata(doc: unknown, url: string): Parsed<ClientMetadata> {
  const bad = (description: string) => ({ ok: false as const, error: 'invalid_client', description });
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return bad('the document is not a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.client_id !== url) return bad('the document’s client_id is not the URL it was fetched from');
  if (typeof d.client_name !== 'string' || !d.client_name.trim()) return bad('the document has no client_name');
  if ('client_secret' in d || 'client_secret_expires_at' in d)
    return bad('the document must not carry a client secret');
  if (d.token_endpoint_auth_method !== undefined && d.token_endpoint_auth_method !== 'none')
    return bad('token_endpoint_auth_method must be none (this relay serves public clients only)');
  const reg = parseRegistration(d);
  if (!reg.ok) return bad(`the document is invalid: ${reg.description}`);
  return { ok: true, value: { clientId: url, clientName: reg.value.clientName, redirectUris: reg.value.redirectUris } };
}
