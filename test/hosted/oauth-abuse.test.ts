// Hosted mode over plain HTTP (a browser without JavaScript): sign-in, the OAuth endpoints, and
// one test per abuse case. Real relay, real Postgres, real SMTP (smtp-server as the sink).
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/relay.ts';
import { clientAddress, newEmail, signedInWithPhone as signedIn, useHostedRelay } from './hosted-relay.ts';
import {
  bearerInitialize,
  allowPage,
  authorizeParams,
  CALLBACK,
  csrfOf,
  formFields,
  hopTarget,
  pkce,
  registerClient as register,
  tokenRequest as token,
  WebClient,
} from './helpers.ts';

const h = useHostedRelay({ args: ['--trust-proxy', '--control-poll-ms', '50'] });

const addr = clientAddress;
const email = () => newEmail();
const signedInWithPhone = () => signedIn(h);

const registerClient = (web: WebClient, redirectUris = [CALLBACK]) =>
  register(h.relay.url, web.forwardedFor!, { redirectUris, name: 'Abuse test' });
const authorizeQuery = (clientId: string, challenge: string, extra: Record<string, string> = {}) =>
  authorizeParams(h.relay.url, clientId, challenge, { state: 'st-ü 1', ...extra });

/** The "Return to <host>" link of an authorize error page (signed in): where the error goes back. */
function returnTarget(html: string): URL {
  const m = /<a data-testid="return" href="([^"]+)"/.exec(html);
  if (!m) throw new Error(`not an error page with a way back: ${html.slice(0, 300)}`);
  return new URL(m[1].replace(/&amp;/g, '&'));
}

/** Consent page → Allow → the code on the redirect. */
async function allow(web: WebClient, query: URLSearchParams, deviceId: string): Promise<URL> {
  const r = await allowPage(web, query, deviceId);
  expect(r.status).toBe(200);
  return hopTarget(r.html);
}

async function tokenRequest(params: Record<string, string>) {
  const { status, body } = await token(h.relay.url, params);
  return { status, body };
}

const mcpInit = (token: string) => bearerInitialize(h.relay.url, token);

describe('discovery', () => {
  it('401 on /mcp names the protected resource metadata; both metadata documents describe this relay', async () => {
    const r = await mcpInit('pb_nope');
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe(
      `Bearer realm="phonebridge", resource_metadata="${h.relay.url}/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="the API key or access token is unknown, expired or revoked"`,
    );
    const prm = await (await fetch(`${h.relay.url}/.well-known/oauth-protected-resource/mcp`)).json();
    expect(prm).toMatchObject({ resource: `${h.relay.url}/mcp`, authorization_servers: [h.relay.url] });
    const as = await (await fetch(`${h.relay.url}/.well-known/oauth-authorization-server`)).json();
    expect(as).toMatchObject({
      issuer: h.relay.url,
      authorization_endpoint: `${h.relay.url}/account/authorize`,
      token_endpoint: `${h.relay.url}/oauth/token`,
      registration_endpoint: `${h.relay.url}/oauth/register`,
      code_challenge_methods_supported: ['S256'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['none'],
    });
  });
});

describe('the whole exchange over HTTP', () => {
  it('register → authorize (state unchanged) → token → /mcp works; Deny answers access_denied', async () => {
    const { web, phone } = await signedInWithPhone();
    const client = await registerClient(web);
    expect(client.status).toBe(201);
    expect(client.body).toMatchObject({
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1:4567/callback'],
    });
    const { verifier, challenge } = pkce();
    const back = await allow(web, authorizeQuery(client.body.client_id, challenge), phone.deviceId);
    expect(back.origin + back.pathname).toBe('http://127.0.0.1:4567/callback');
    expect(back.searchParams.get('state')).toBe('st-ü 1');
    expect(back.searchParams.get('iss')).toBe(h.relay.url);
    const t = await tokenRequest({
      grant_type: 'authorization_code',
      code: back.searchParams.get('code')!,
      redirect_uri: 'http://127.0.0.1:4567/callback',
      client_id: client.body.client_id,
      code_verifier: verifier,
      resource: `${h.relay.url}/mcp`,
    });
    expect(t.status).toBe(200);
    expect(t.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'devices:read devices:act' });
    expect((await mcpInit(t.body.access_token)).status).toBe(200);

    const page = await web.get(`/account/authorize?${authorizeQuery(client.body.client_id, challenge).toString()}`);
    const denied = await web.post('/account/authorize', {
      ...formFields(page.html, '/account/authorize'),
      decision: 'deny',
    });
    const target = hopTarget(denied.html);
    expect(target.searchParams.get('error')).toBe('access_denied');
    expect(target.searchParams.get('state')).toBe('st-ü 1');
  });
});

describe('abuse cases', () => {
  it('an authorization code works once: the second exchange is invalid_grant', async () => {
    const { web, phone } = await signedInWithPhone();
    const client = await registerClient(web);
    const { verifier, challenge } = pkce();
    const code = (await allow(web, authorizeQuery(client.body.client_id, challenge), phone.deviceId)).searchParams.get(
      'code',
    )!;
    const params = {
      grant_type: 'authorization_code',
      code,
      redirect_uri: 'http://127.0.0.1:4567/callback',
      client_id: client.body.client_id,
      code_verifier: verifier,
    };
    expect((await tokenRequest(params)).status).toBe(200);
    const again = await tokenRequest(params);
    expect(again).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  it('a wrong PKCE verifier is invalid_grant (and burns the code)', async () => {
    const { web, phone } = await signedInWithPhone();
    const client = await registerClient(web);
    const { verifier, challenge } = pkce();
    const code = (await allow(web, authorizeQuery(client.body.client_id, challenge), phone.deviceId)).searchParams.get(
      'code',
    )!;
    const base = {
      grant_type: 'authorization_code',
      code,
      redirect_uri: 'http://127.0.0.1:4567/callback',
      client_id: client.body.client_id,
    };
    expect(await tokenRequest({ ...base, code_verifier: pkce().verifier })).toMatchObject({
      status: 400,
      body: { error: 'invalid_grant' },
    });
    expect(await tokenRequest({ ...base, code_verifier: verifier })).toMatchObject({
      status: 400,
      body: { error: 'invalid_grant' },
    });
  });

  it('plain PKCE and a missing challenge are refused back to the client with invalid_request', async () => {
    const { web } = await signedInWithPhone();
    const client = await registerClient(web);
    const plain = await web.get(
      `/account/authorize?${authorizeQuery(client.body.client_id, 'x'.repeat(43), { code_challenge_method: 'plain' }).toString()}`,
    );
    expect(returnTarget(plain.html).searchParams.get('error')).toBe('invalid_request');
    const q = authorizeQuery(client.body.client_id, 'x');
    q.delete('code_challenge');
    const missing = await web.get(`/account/authorize?${q.toString()}`);
    expect(returnTarget(missing.html).searchParams.get('error')).toBe('invalid_request');
    const wrongResource = await web.get(
      `/account/authorize?${authorizeQuery(client.body.client_id, pkce().challenge, { resource: 'https://evil.example/mcp' }).toString()}`,
    );
    expect(returnTarget(wrongResource.html).searchParams.get('error')).toBe('invalid_target');
  });

  it('an unregistered redirect URI gets an error page, never a redirect', async () => {
    const { web } = await signedInWithPhone();
    const client = await registerClient(web);
    const r = await web.get(
      `/account/authorize?${authorizeQuery(client.body.client_id, pkce().challenge, { redirect_uri: 'https://evil.example/cb' }).toString()}`,
    );
    expect(r.status).toBe(400);
    expect(r.html).toContain('redirect_uri is not registered');
    expect(r.html).not.toContain('evil.example');
    expect(r.location).toBeNull();
  });

  it('registration refuses http redirect URIs off loopback, and accepts loopback on any port', async () => {
    const web = new WebClient(h.relay.url, undefined, addr());
    expect(await registerClient(web, ['http://example.com/cb'])).toMatchObject({
      status: 400,
      body: { error: 'invalid_redirect_uri' },
    });
    expect(
      (await registerClient(web, ['http://localhost:1/cb', 'http://[::1]:65000/cb', 'https://app.example/cb'])).status,
    ).toBe(201);
  });

  it('the eleventh registration from one address within ten minutes is 429', async () => {
    const web = new WebClient(h.relay.url, undefined, addr());
    for (let i = 0; i < 10; i++) expect((await registerClient(web)).status).toBe(201);
    expect((await registerClient(web)).status).toBe(429);
    expect((await registerClient(new WebClient(h.relay.url, undefined, addr()))).status).toBe(201);
  });

  it('an expired authorization code is invalid_grant', async () => {
    const { web, phone, account } = await signedInWithPhone();
    const client = await registerClient(web);
    const { verifier, challenge } = pkce();
    const code = randomBytes(32).toString('base64url');
    const { hashSecret } = await import('../../src/hosted/web.ts');
    await h.relay.relay.store.store.hosted.createAuthorizationCode({
      codeHash: hashSecret('authcode', code),
      clientId: client.body.client_id,
      redirectUri: 'http://127.0.0.1:4567/callback',
      codeChallenge: challenge,
      resource: `${h.relay.url}/mcp`,
      accountId: account.id,
      deviceId: phone.deviceId,
      scopes: ['devices:read'],
      expiresAt: new Date(Date.now() - 1000),
    });
    const r = await tokenRequest({
      grant_type: 'authorization_code',
      code,
      redirect_uri: 'http://127.0.0.1:4567/callback',
      client_id: client.body.client_id,
      code_verifier: verifier,
    });
    expect(r).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  it('a state change without the CSRF token is 403 and changes nothing', async () => {
    const { web, phone } = await signedInWithPhone();
    const r = await web.post('/account/keys', { device: phone.deviceId, scope: 'devices:read' });
    expect(r.status).toBe(403);
    expect(await h.relay.relay.store.store.listTokens({ deviceId: phone.deviceId })).toEqual([]);
  });

  it('a cross-origin POST (right token, wrong Origin; or no Origin nor Sec-Fetch-Site) is 403', async () => {
    const { web, phone } = await signedInWithPhone();
    const csrf = csrfOf((await web.get('/account')).html);
    expect(
      (await web.post('/account/phones/remove', { csrf, device: phone.deviceId }, { origin: 'https://evil.example' }))
        .status,
    ).toBe(403);
    expect((await web.post('/account/phones/remove', { csrf, device: phone.deviceId }, { origin: null })).status).toBe(
      403,
    );
    expect(await h.relay.relay.store.store.getDevice(phone.deviceId)).toBeDefined();
    expect((await web.post('/account/phones/remove', { csrf, device: phone.deviceId })).status).toBe(303);
    expect(await h.relay.relay.store.store.getDevice(phone.deviceId)).toBeUndefined();
  });

  it('a magic link prefetched by GET (twice) still signs in by POST, once', async () => {
    const who = email();
    const web = new WebClient(h.relay.url, undefined, addr());
    const form = await web.get('/account/signin');
    await web.post('/account/signin', { csrf: csrfOf(form.html), email: who });
    const link = new URL(await h.sink.nextLink(who));
    const scanner = new WebClient(h.relay.url, undefined, addr());
    expect((await scanner.get(link.pathname + link.search)).status).toBe(200);
    expect((await scanner.get(link.pathname + link.search)).status).toBe(200);
    const page = await web.get(link.pathname + link.search);
    const done = await web.post('/account/signin/link', {
      csrf: csrfOf(page.html),
      code: link.searchParams.get('code')!,
    });
    expect(done).toMatchObject({ status: 303, location: '/account' });
    expect((await web.get('/account')).status).toBe(200);
    // Signed in now: the page's token is the session's; the code itself is spent.
    const reopened = await web.get(link.pathname + link.search);
    expect(reopened.status).toBe(400);
    const again = await web.post('/account/signin/link', {
      csrf: csrfOf((await web.get('/account')).html),
      code: link.searchParams.get('code')!,
    });
    expect(again.status).toBe(400);
  });

  it('a magic-link POST without the page token fails and leaves the code usable', async () => {
    const who = email();
    const web = new WebClient(h.relay.url, undefined, addr());
    const form = await web.get('/account/signin');
    await web.post('/account/signin', { csrf: csrfOf(form.html), email: who });
    const link = new URL(await h.sink.nextLink(who));
    const code = link.searchParams.get('code')!;
    const attacker = new WebClient(h.relay.url, undefined, addr());
    expect((await attacker.post('/account/signin/link', { code })).status).toBe(403);
    expect(attacker.jar.has('pb_session')).toBe(false);
    const page = await web.get(link.pathname + link.search);
    expect((await web.post('/account/signin/link', { csrf: csrfOf(page.html), code })).status).toBe(303);
  });

  it('sign-in mails are limited per email and address', async () => {
    const who = email();
    const statuses: number[] = [];
    const from = addr();
    for (let i = 0; i < 6; i++) {
      const web = new WebClient(h.relay.url, undefined, from);
      const form = await web.get('/account/signin');
      statuses.push((await web.post('/account/signin', { csrf: csrfOf(form.html), email: who })).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it('the session cookie is HttpOnly and SameSite=Lax (not Secure on http)', async () => {
    const who = email();
    const web = new WebClient(h.relay.url, undefined, addr());
    const form = await web.get('/account/signin');
    await web.post('/account/signin', { csrf: csrfOf(form.html), email: who });
    const link = new URL(await h.sink.nextLink(who));
    const page = await web.get(link.pathname + link.search);
    const done = await web.post('/account/signin/link', {
      csrf: csrfOf(page.html),
      code: link.searchParams.get('code')!,
    });
    const cookie = done.res.headers.getSetCookie().find((c) => c.startsWith('pb_session='))!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    expect(cookie).not.toMatch(/Secure/);
    expect(page.res.headers.get('content-security-policy')).toContain("script-src 'self'");
  });

  it('limit_reached from the dashboard: at creation of a code and of a key, and at redemption', async () => {
    const { web, account } = await signedInWithPhone();
    const store = h.relay.relay.store.store;
    await store.setAccountPlan(account.id, { maxDevices: 2, maxKeys: 0 });
    const csrf = csrfOf((await web.get('/account')).html);
    const paired = await web.post('/account/pair', { csrf, name: 'second' });
    expect(paired.status).toBe(200);
    const code = /data-testid="pairing-code">([^<]+)</.exec(paired.html)![1];
    expect(
      (
        await web.post('/account/keys', {
          csrf,
          device: (await store.listDevices(account.id))[0].id,
          scope: 'devices:read',
        })
      ).html,
    ).toContain('limit_reached');
    await store.setAccountPlan(account.id, { maxDevices: 1, maxKeys: 0 });
    const atCap = await web.post('/account/pair', { csrf });
    expect(atCap.status).toBe(403);
    expect(atCap.html).toContain('limit_reached');
    const { generateDeviceKey } = await import('../../src/crypto/device-auth.ts');
    const redeem = await fetch(`${h.relay.url}/pair`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code, name: 'x', public_key: generateDeviceKey().publicKeySpkiBase64 }),
    });
    expect(redeem.status).toBe(403);
    expect((await redeem.json()).error).toBe('limit_reached');
  });

  it('a locked account gets 402 with its OAuth token; unlocking restores it without re-pairing', async () => {
    const { web, phone, account } = await signedInWithPhone();
    const client = await registerClient(web);
    const { verifier, challenge } = pkce();
    const code = (await allow(web, authorizeQuery(client.body.client_id, challenge), phone.deviceId)).searchParams.get(
      'code',
    )!;
    const t = await tokenRequest({
      grant_type: 'authorization_code',
      code,
      redirect_uri: 'http://127.0.0.1:4567/callback',
      client_id: client.body.client_id,
      code_verifier: verifier,
    });
    const token = t.body.access_token as string;
    expect((await mcpInit(token)).status).toBe(200);
    const store = h.relay.relay.store.store;
    await store.setAccountLocked(account.id, true);
    await waitFor(async () => (await mcpInit(token)).status === 402, 5_000, '402 while locked');
    const r = await mcpInit(token);
    expect((await r.json()).error).toBe('subscription_required');
    await store.setAccountLocked(account.id, false);
    await waitFor(async () => (await mcpInit(token)).status === 200, 5_000, '200 after unlock');
    expect(await store.getDevice(phone.deviceId)).toBeDefined();
  });
});
