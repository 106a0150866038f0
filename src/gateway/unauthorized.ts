// What a client without a working credential is told on /mcp, and in local mode on the OAuth
// discovery paths: enough for a person to act on, whichever client shows it
// (docs/decisions/0168-unauthorized-says-what-to-do.md).
import type { TemplatedApp } from '../uws.ts';
import { Exchange, type Headers } from './http.ts';

const HOW_LOCAL =
  'send the API key as the X-Api-Key header (or Authorization: Bearer); `phonebridge keys create` makes one';

/**
 * The 401 on /mcp: `invalid_token` (RFC 6750 §3.1) when a credential was presented and failed.
 * `oauthOffered`: a feature serves OAuth here (McpMount.offerOAuth), so the challenge names its
 * resource metadata.
 */
export function unauthorized(
  challenge: string,
  presented: boolean,
  oauthOffered: boolean,
): { headers: Headers; body: string } {
  if (presented) {
    const description = 'the API key or access token is unknown, expired or revoked';
    return {
      headers: { 'WWW-Authenticate': `${challenge}, error="invalid_token", error_description="${description}"` },
      body: JSON.stringify({ error: 'invalid_token', error_description: description, message: description }),
    };
  }
  const description = oauthOffered
    ? 'send an API key as X-Api-Key, or connect with OAuth (see WWW-Authenticate resource_metadata)'
    : HOW_LOCAL;
  return {
    headers: { 'WWW-Authenticate': challenge },
    body: JSON.stringify({ error: 'unauthorized', error_description: description, message: description }),
  };
}

/**
 * A relay whose features offer no OAuth has no authorization server. A client that falls into
 * OAuth discovery gets a 404 whose JSON says how to authenticate, instead of a bare "not found"
 * it reports as a failed registration.
 */
export function registerLocalAuthHelp(app: TemplatedApp): void {
  const body = {
    error: 'oauth_not_supported',
    error_description: `this relay does not run an OAuth server: ${HOW_LOCAL}`,
  };
  for (const path of [
    '/.well-known/oauth-protected-resource',
    '/.well-known/oauth-protected-resource/*',
    '/.well-known/oauth-authorization-server',
    '/.well-known/oauth-authorization-server/*',
    '/.well-known/openid-configuration',
    '/register',
    '/oauth/register',
  ])
    app.any(path, (res) => new Exchange(res).json(404, body, { 'Cache-Control': 'no-store' }));
}
