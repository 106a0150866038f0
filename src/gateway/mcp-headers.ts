// Which request headers /mcp reads, copied by name or in one pass over every header line: uWS's
// request object is valid only during the synchronous handler (McpEndpoint.begin), so
// everything later reads this copy.
import { Buffer } from 'node:buffer';
import type { HttpRequest as Req } from '../uws.ts';
import { startsWith } from '../protocol/string-builtins.ts';
import { isSessionRevision } from '../protocol/revisions.ts';

export type McpHeaders = Record<string, string>;
/**
 * Where begin() keeps every X-Forwarded-For value, comma-joined (the chain reads the same:
 * src/gateway/client-address.ts), when proxies are trusted; no real header has a space. Kept
 * by the pass over every line only: initialize reads it, and carries no session id.
 */
export const FORWARDED_CHAIN = 'forwarded chain';
const PARAM_PREFIX = 'mcp-param-';

/**
 * One request's copy, with a field for every name /mcp reads from the start: all copies share
 * one hidden class, and the names every request carries are stored through named properties
 * (collectHeader). A plain object took a new shape for each header order, and its keyed loads
 * and stores went megamorphic: 160–200 ns a request against 60–100 in a micro-benchmark
 * (docs/BENCHMARKS.md, "Where a closed-loop cross-node call goes now").
 */
class CollectedHeaders {
  'x-api-key': string | undefined = undefined;
  authorization: string | undefined = undefined;
  'mcp-session-id': string | undefined = undefined;
  'mcp-protocol-version': string | undefined = undefined;
  'mcp-method': string | undefined = undefined;
  'mcp-name': string | undefined = undefined;
  accept: string | undefined = undefined;
  'content-type': string | undefined = undefined;
  origin: string | undefined = undefined;
  'last-event-id': string | undefined = undefined;
  'x-forwarded-for': string | undefined = undefined;
  'forwarded chain': string | undefined = undefined;
}

// The pass over every header line (req.forEach), for a request that is not in a session of a
// session-era revision (collectHeaders); the visitor is shared, its target set just before the
// pass. A name's first non-empty value counts — except for the headers 2026-07-28 checks
// against the body (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*): a name sent on
// several lines is one field whose value is every line's, joined by ", " in order (RFC 9110
// §5.3), so a repeated line matches the body only if the whole field does, whichever line an
// intermediary read (docs/PROTOCOL.md, "Revision 2026-07-28 (stateless)").
let collecting: CollectedHeaders & Record<string, string | undefined>;
let collectChain: boolean;
const joined = (prev: string | undefined, v: string): string => (prev === undefined ? v : `${prev}, ${v}`);
const collectHeader = (k: string, v: string): void => {
  const h = collecting;
  // Every name read is compared, by length first: a name from uWS is a fresh string, so a Set
  // lookup hashed each one the relay does not read (host, content-length, …) on every request,
  // and a plain switch compared each with up to eleven names (docs/BENCHMARKS.md, "Instructions
  // per call under callgrind").
  switch (k.length) {
    case 6:
      if (k === 'accept') {
        if (h.accept === undefined && v !== '') h.accept = v;
        return;
      }
      if (k === 'origin') {
        if (h.origin === undefined && v !== '') h.origin = v;
        return;
      }
      break;
    case 8:
      if (k === 'mcp-name') {
        h['mcp-name'] = joined(h['mcp-name'], v);
        return;
      }
      break;
    case 9:
      if (k === 'x-api-key') {
        if (h['x-api-key'] === undefined && v !== '') h['x-api-key'] = v;
        return;
      }
      break;
    case 10:
      if (k === 'mcp-method') {
        h['mcp-method'] = joined(h['mcp-method'], v);
        return;
      }
      break;
    case 12:
      if (k === 'content-type') {
        if (h['content-type'] === undefined && v !== '') h['content-type'] = v;
        return;
      }
      break;
    case 13:
      if (k === 'authorization') {
        if (h.authorization === undefined && v !== '') h.authorization = v;
        return;
      }
      if (k === 'last-event-id') {
        if (h['last-event-id'] === undefined && v !== '') h['last-event-id'] = v;
        return;
      }
      break;
    case 14:
      if (k === 'mcp-session-id') {
        if (h['mcp-session-id'] === undefined && v !== '') h['mcp-session-id'] = v;
        return;
      }
      break;
    case 15:
      if (k === 'x-forwarded-for') {
        if (h['x-forwarded-for'] === undefined && v !== '') h['x-forwarded-for'] = v;
        if (collectChain) h[FORWARDED_CHAIN] = h[FORWARDED_CHAIN] === undefined ? v : `${h[FORWARDED_CHAIN]},${v}`;
        return;
      }
      break;
    case 20:
      if (k === 'mcp-protocol-version') {
        h['mcp-protocol-version'] = joined(h['mcp-protocol-version'], v);
        return;
      }
      break;
  }
  if (startsWith.call(k, PARAM_PREFIX)) h[k] = joined(h[k], v);
};

// The names read one by one (namedHeaders), as bytes made once: uWS turns a string argument
// into UTF-8 on every call (a copy it allocates), and reads an ArrayBuffer's bytes as they are,
// without asking a view (a Buffer) for its buffer, offset and length as well.
const nameBytes = (name: string): ArrayBuffer => new Uint8Array(Buffer.from(name)).buffer;
const SESSION_ID = nameBytes('mcp-session-id');
const VERSION = nameBytes('mcp-protocol-version');
const API_KEY = nameBytes('x-api-key');
const AUTHORIZATION = nameBytes('authorization');
const ACCEPT = nameBytes('accept');
const CONTENT_TYPE = nameBytes('content-type');
const ORIGIN = nameBytes('origin');
const LAST_EVENT_ID = nameBytes('last-event-id');
const present = (v: string): string | undefined => (v === '' ? undefined : v);

/**
 * The request's headers. A request in a session whose version header names a session-era
 * revision (or none) reads each name /mcp reads with one native call (namedHeaders); any other
 * takes the pass over every header, whose fields are joined as 2026-07-28 requires
 * (docs/decisions/0262-session-requests-read-headers-by-name.md). A body of such a request that
 * names 2026-07-28 is refused at its version header's compare, before any field the named path
 * leaves unread. Last-Event-ID is read only where asked (GET resumes; a POST never does).
 */
export function collectHeaders(req: Req, trustProxy: boolean, readsLastEventId = true): McpHeaders {
  const sessionId = req.getHeader(SESSION_ID);
  if (sessionId !== '') {
    const version = req.getHeader(VERSION);
    if (version === '' || isSessionRevision(version)) return namedHeaders(req, sessionId, version, readsLastEventId);
  }
  const h = new CollectedHeaders() as CollectedHeaders & Record<string, string | undefined>;
  collecting = h;
  collectChain = trustProxy;
  req.forEach(collectHeader);
  // A single empty line of a joined header is no header, as for the others (an empty
  // Mcp-Param-* stays: it mirrors an empty string).
  if (h['mcp-protocol-version'] === '') h['mcp-protocol-version'] = undefined;
  if (h['mcp-method'] === '') h['mcp-method'] = undefined;
  if (h['mcp-name'] === '') h['mcp-name'] = undefined;
  // Fields of names the request did not carry hold undefined: read as absent, like a missing key.
  return h as McpHeaders;
}

/**
 * A session-era request's headers, each by name: each name's first line, an empty one as no
 * header. The pass over every header made two strings and a call from C++ into JavaScript per
 * header, read or not (docs/decisions/0262-session-requests-read-headers-by-name.md).
 * X-Forwarded-For is not read: only initialize reads it (session-opener.ts), and initialize
 * carries no session id.
 */
function namedHeaders(req: Req, sessionId: string, version: string, readsLastEventId: boolean): McpHeaders {
  const h = new CollectedHeaders() as CollectedHeaders & Record<string, string | undefined>;
  h['mcp-session-id'] = sessionId;
  h['mcp-protocol-version'] = present(version);
  h['x-api-key'] = present(req.getHeader(API_KEY));
  h.authorization = present(req.getHeader(AUTHORIZATION));
  h.accept = present(req.getHeader(ACCEPT));
  h['content-type'] = present(req.getHeader(CONTENT_TYPE));
  h.origin = present(req.getHeader(ORIGIN));
  if (readsLastEventId) h['last-event-id'] = present(req.getHeader(LAST_EVENT_ID));
  return h as McpHeaders;
}
