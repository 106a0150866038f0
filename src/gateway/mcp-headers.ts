// Which request headers /mcp reads, copied in one pass: uWS's request object is valid only
// during the synchronous handler (McpEndpoint.begin), so everything later reads this copy.
import type { HttpRequest as Req } from '../uws.ts';

const MCP_HEADERS = [
  'x-api-key',
  'authorization',
  'mcp-session-id',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  'accept',
  'content-type',
  'origin',
  'last-event-id',
  'x-forwarded-for',
] as const;
export type McpHeaders = Record<string, string>;
/**
 * Where begin() keeps every X-Forwarded-For value, comma-joined (the chain reads the same:
 * src/gateway/client-address.ts), when proxies are trusted; no real header has a space.
 */
export const FORWARDED_CHAIN = 'forwarded chain';
const MCP_HEADER_SET = new Set<string>(MCP_HEADERS);
const PARAM_PREFIX = 'mcp-param-';

// One pass over the request's headers (req.forEach) instead of a native call per name; the
// visitor is shared, its target set just before the pass.
let collecting: McpHeaders;
let collectChain: boolean;
const collectHeader = (k: string, v: string): void => {
  if (MCP_HEADER_SET.has(k)) {
    // Like req.getHeader: the first value, and an empty one is no header.
    if (collecting[k] === undefined && v !== '') collecting[k] = v;
    if (collectChain && k === 'x-forwarded-for')
      collecting[FORWARDED_CHAIN] =
        collecting[FORWARDED_CHAIN] === undefined ? v : `${collecting[FORWARDED_CHAIN]},${v}`;
  } else if (k.startsWith(PARAM_PREFIX)) collecting[k] = v;
};

export function collectHeaders(req: Req, trustProxy: boolean): McpHeaders {
  const h: McpHeaders = {};
  collecting = h;
  collectChain = trustProxy;
  req.forEach(collectHeader);
  return h;
}
