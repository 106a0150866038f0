// CORS on hosted mode's discovery documents: a browser-based MCP client reads them from another
// origin, and a request with a header outside the CORS-safelisted ones (`Mcp-Protocol-Version`,
// which the MCP SDK sends on discovery) is preceded by a preflight. Every path whose GET carries
// `Access-Control-Allow-Origin` answers that preflight, or the browser never sends the GET.
import { expect, it } from 'vitest';
import { useHostedRelay } from './hosted-relay.ts';

const h = useHostedRelay();

/** Every path hosted mode serves GET on (docs/HOSTED.md). */
const GET_PATHS = [
  '/account/signin',
  '/account/signin/link?code=nope',
  '/account',
  '/account/phones.json',
  '/account/authorize',
  '/account/assets/style.css',
  '/favicon.ico',
  '/.well-known/oauth-protected-resource/mcp',
  '/.well-known/oauth-protected-resource',
  '/.well-known/oauth-authorization-server',
];

it('answers the CORS preflight on every path whose GET is readable cross-origin', async () => {
  const cors: string[] = [];
  for (const path of GET_PATHS) {
    const get = await fetch(`${h.url}${path}`, { redirect: 'manual', headers: { origin: 'https://app.example' } });
    await get.arrayBuffer();
    if (get.headers.get('access-control-allow-origin') === '*') cors.push(path);
  }
  // The three discovery documents (RFC 9728 at both paths, RFC 8414); the pages stay same-origin.
  expect(cors).toEqual([
    '/.well-known/oauth-protected-resource/mcp',
    '/.well-known/oauth-protected-resource',
    '/.well-known/oauth-authorization-server',
  ]);
  for (const path of cors) {
    const preflight = await fetch(`${h.url}${path}`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'mcp-protocol-version',
      },
    });
    await preflight.arrayBuffer();
    expect(preflight.status, path).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin'), path).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')?.split(/,\s*/), path).toContain('GET');
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase().split(/,\s*/), path).toContain(
      'mcp-protocol-version',
    );
  }
});

it('names OPTIONS in Allow on the discovery paths, and 405s a method none of them serves', async () => {
  for (const path of [
    '/.well-known/oauth-protected-resource/mcp',
    '/.well-known/oauth-protected-resource',
    '/.well-known/oauth-authorization-server',
  ]) {
    const put = await fetch(`${h.url}${path}`, { method: 'PUT' });
    expect(put.status, path).toBe(405);
    expect(put.headers.get('allow'), path).toBe('GET, HEAD, OPTIONS');
    expect(await put.json(), path).toEqual({ error: 'method_not_allowed', message: 'use GET, HEAD or OPTIONS' });
  }
});
