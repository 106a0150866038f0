// The token endpoint's error responses against RFC 6749 §5.2: the error code the RFC names for
// each fault (invalid_request, invalid_client, invalid_grant, unauthorized_client,
// unsupported_grant_type, invalid_scope; invalid_target from RFC 8707), HTTP 400 — 401 only with
// a WWW-Authenticate challenge, for a client that tried the Authorization header —, a JSON body
// of `error` and a readable `error_description` in the RFC's character set, `Cache-Control:
// no-store`. A request refused as malformed changes nothing: its code or refresh token still
// works. Real relay, real Postgres, real SMTP sink, the OAuth flow over HTTP.
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/crypto/secrets.ts';
import { signedInWithPhone as signedIn, useHostedRelay } from './hosted-relay.ts';
import { allowPage, authorizeParams, CALLBACK, hopTarget, pkce, registerClient, type WebClient } from './helpers.ts';

const h = useHostedRelay({ args: ['--trust-proxy', '--control-poll-ms', '50'] });

interface Sent {
  body?: string | URLSearchParams;
  headers?: Record<string, string>;
  method?: string;
}

async function send(req: Sent) {
  const r = await fetch(`${h.relay.url}/oauth/token`, {
    method: req.method ?? 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...req.headers },
    body: req.body === undefined ? undefined : req.body.toString(),
  });
  const text = await r.text();
  return { status: r.status, headers: r.headers, json: JSON.parse(text) as Record<string, unknown> };
}

const form = (params: Record<string, string>) => ({ body: new URLSearchParams(params) });

/** RFC 6749 §5.2: error_description is %x20-21 / %x23-5B / %x5D-7E (no `"`, no `\`, ASCII). */
const RFC_DESCRIPTION = /^[\x20-\x21\x23-\x5b\x5d-\x7e]+$/;

/** An RFC 6749 §5.2 error response: this status, code and description, JSON, never cached. */
function expectError(r: Awaited<ReturnType<typeof send>>, status: number, error: string, description: string) {
  expect({ status: r.status, json: r.json }).toEqual({ status, json: { error, error_description: description } });
  expect(description).toMatch(RFC_DESCRIPTION);
  expect(r.headers.get('content-type')).toBe('application/json');
  expect(r.headers.get('cache-control')).toBe('no-store');
  // Read by clients on any origin, errors included.
  expect(r.headers.get('access-control-allow-origin')).toBe('*');
}

/** A signed-in account with a phone, a registered client and a fresh code for it. */
async function codeFor(web: WebClient, clientId: string, deviceId: string, scopes?: string[]) {
  const { verifier, challenge } = pkce();
  const answer = await allowPage(web, authorizeParams(h.relay.url, clientId, challenge), deviceId, scopes);
  const code = hopTarget(answer.html).searchParams.get('code')!;
  return {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CALLBACK,
    client_id: clientId,
    code_verifier: verifier,
  };
}

async function setup() {
  const { web, phone } = await signedIn(h);
  const client = await registerClient(h.relay.url, web.forwardedFor!);
  expect(client.status).toBe(201);
  return { web, phone, clientId: client.body.client_id };
}

describe('the token endpoint’s errors (RFC 6749 §5.2)', () => {
  it('grant_type: missing is invalid_request; one the server does not support is unsupported_grant_type', async () => {
    const { clientId } = await setup();
    expectError(await send(form({ client_id: clientId })), 400, 'invalid_request', 'grant_type is required');
    expectError(
      await send(form({ grant_type: 'password', client_id: clientId, username: 'a', password: 'b' })),
      400,
      'unsupported_grant_type',
      'grant_type password is not supported; use authorization_code or refresh_token',
    );
  });

  it('client_id: missing or unknown is invalid_client with 400; tried through the Authorization header, 401 with its challenge', async () => {
    const { web, phone, clientId } = await setup();
    const exchange = await codeFor(web, clientId, phone.deviceId);
    const { client_id: _id, ...withoutClient } = exchange;
    expectError(
      await send(form(withoutClient)),
      400,
      'invalid_client',
      'client_id is required: clients of this server are public and identify themselves with it (token_endpoint_auth_method none)',
    );
    expectError(
      await send(form({ ...exchange, client_id: 'client_unknown' })),
      400,
      'invalid_client',
      `unknown client_id; register the client at ${h.relay.url}/oauth/register first`,
    );
    const basic = await send({
      ...form(withoutClient),
      headers: { authorization: `Basic ${Buffer.from(`${clientId}:secret`).toString('base64')}` },
    });
    expectError(
      basic,
      401,
      'invalid_client',
      'client authentication in the Authorization header is not supported: send client_id in the body (token_endpoint_auth_method none)',
    );
    expect(basic.headers.get('www-authenticate')).toBe('Basic realm="phonebridge"');
    // None of these spent the code.
    expect((await send(form(exchange))).status).toBe(200);
  });

  it('a missing code, redirect_uri or code_verifier is invalid_request naming it, and the code stays good', async () => {
    const { web, phone, clientId } = await setup();
    const exchange = await codeFor(web, clientId, phone.deviceId);
    for (const [name, description] of [
      ['code', 'code is required'],
      ['redirect_uri', 'redirect_uri is required: the one the authorization request named'],
      ['code_verifier', 'code_verifier is required (PKCE)'],
    ] as const) {
      const params: Record<string, string> = { ...exchange };
      delete params[name];
      expectError(await send(form(params)), 400, 'invalid_request', description);
      // An empty value is no value (RFC 6749 §3.2).
      expectError(await send(form({ ...exchange, [name]: '' })), 400, 'invalid_request', description);
    }
    const ok = await send(form(exchange));
    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    expect(ok.headers.get('pragma')).toBe('no-cache');
  });

  it('a wrong code, verifier or redirect_uri stays invalid_grant with its own description', async () => {
    const { web, phone, clientId } = await setup();
    const first = await codeFor(web, clientId, phone.deviceId);
    expectError(
      await send(form({ ...first, code_verifier: pkce().verifier })),
      400,
      'invalid_grant',
      'code_verifier does not match the code_challenge',
    );
    expectError(await send(form(first)), 400, 'invalid_grant', 'the code is unknown, expired or already used');
    const second = await codeFor(web, clientId, phone.deviceId);
    expectError(
      await send(form({ ...second, redirect_uri: 'http://127.0.0.1:4567/other' })),
      400,
      'invalid_grant',
      'redirect_uri does not match the authorization request',
    );
  });

  it('a parameter sent twice is invalid_request naming it, and changes nothing', async () => {
    const { web, phone, clientId } = await setup();
    const exchange = await codeFor(web, clientId, phone.deviceId);
    const twice = new URLSearchParams(exchange);
    twice.append('code_verifier', exchange.code_verifier);
    expectError(await send({ body: twice }), 400, 'invalid_request', 'code_verifier is repeated');
    expect((await send(form(exchange))).status).toBe(200);
  });

  it('a body that is not form-encoded is invalid_request saying so; a body over 16 KiB is 413 in the same shape', async () => {
    const { web, phone, clientId } = await setup();
    const exchange = await codeFor(web, clientId, phone.deviceId);
    expectError(
      await send({ body: JSON.stringify(exchange), headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_request',
      'the body must be application/x-www-form-urlencoded',
    );
    expectError(
      await send(form({ ...exchange, padding: 'x'.repeat(17 * 1024) })),
      413,
      'invalid_request',
      'the body is larger than 16384 bytes',
    );
    expect((await send(form(exchange))).status).toBe(200);
    // Registration, the other OAuth endpoint, answers its 413 in its own error shape.
    const reg = await fetch(`${h.relay.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'x'.repeat(17 * 1024), redirect_uris: [CALLBACK] }),
    });
    expect(reg.status).toBe(413);
    expect(await reg.json()).toEqual({
      error: 'invalid_client_metadata',
      error_description: 'the body is larger than 16384 bytes',
    });
  });

  it('the token endpoint takes POST only: another method is 405 invalid_request with Allow', async () => {
    const r = await send({ method: 'GET' });
    expectError(r, 405, 'invalid_request', 'the token endpoint takes POST');
    expect(r.headers.get('allow')).toBe('POST, OPTIONS');
  });

  it('refresh_token: missing is invalid_request; a scope beyond the grant or unknown is invalid_scope and rotates nothing; a narrower one narrows the access token', async () => {
    const { web, phone, clientId } = await setup();
    const exchange = await codeFor(web, clientId, phone.deviceId, ['devices:read', 'devices:act']);
    const t = await send(form(exchange));
    expect(t.status).toBe(200);
    const refresh = { grant_type: 'refresh_token', client_id: clientId, refresh_token: t.json.refresh_token as string };
    expectError(
      await send(form({ grant_type: 'refresh_token', client_id: clientId })),
      400,
      'invalid_request',
      'refresh_token is required',
    );
    expectError(
      await send(form({ ...refresh, scope: 'devices:read devices:lease' })),
      400,
      'invalid_scope',
      'scope may only narrow the grant (devices:read devices:act); not granted: devices:lease',
    );
    expectError(
      await send(form({ ...refresh, scope: 'devices:read admin' })),
      400,
      'invalid_scope',
      'unknown scope admin; scopes are devices:read devices:act devices:lease runs:start',
    );
    // The refresh token was not rotated by those: it still works, once, for a narrower token.
    const narrowed = await send(form({ ...refresh, scope: 'devices:read' }));
    expect(narrowed.status).toBe(200);
    expect(narrowed.json.scope).toBe('devices:read');
    const token = await h.relay.relay.store.store.findTokenByHash(
      sha256Hex(narrowed.json.access_token as string),
      new Date(),
    );
    expect(token?.scopes).toEqual(['devices:read']);
    // Without a scope, a refresh is the whole grant again (RFC 6749 §6).
    const whole = await send(
      form({ grant_type: 'refresh_token', client_id: clientId, refresh_token: narrowed.json.refresh_token as string }),
    );
    expect(whole.json.scope).toBe('devices:read devices:act');
  });

  it('a resource other than this relay’s /mcp is invalid_target', async () => {
    const { web, phone, clientId } = await setup();
    const exchange = await codeFor(web, clientId, phone.deviceId);
    expectError(
      await send(form({ ...exchange, resource: 'https://evil.example/mcp' })),
      400,
      'invalid_target',
      `resource must be ${h.relay.url}/mcp`,
    );
    expect((await send(form({ ...exchange, resource: `${h.relay.url}/mcp` }))).status).toBe(200);
  });
});
