import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  checkAuthorizationRequest,
  grantedScopes,
  parseRegistration,
  redirectUriProblem,
  redirectWith,
  requestedScopes,
  verifierMatches,
} from './oauth-rules.ts';
import { csrfMatches, parseCookies, safeNext, sameOrigin, setCookie } from './web.ts';

const MCP = 'https://relay.example/mcp';

describe('redirect URIs', () => {
  it('https anywhere; http only on loopback with any port; no fragments or credentials', () => {
    for (const ok of ['https://app.example/cb', 'http://127.0.0.1:53123/cb', 'http://[::1]:1/x', 'http://localhost/cb'])
      expect(redirectUriProblem(ok)).toBeUndefined();
    for (const bad of [
      'http://example.com/cb',
      'http://127.0.0.2.nip.io/cb',
      'https://a.example/cb#x',
      'https://a.example/cb#',
      'http://127.0.0.1:53123/cb#',
      'https://u:p@a.example/',
      'javascript:alert(1)',
      'cb',
      '',
    ])
      expect(redirectUriProblem(bad)).toBeDefined();
  });

  it('registration needs at least one valid redirect URI and only code/refresh grants', () => {
    expect(parseRegistration({ redirect_uris: [] })).toMatchObject({ ok: false, error: 'invalid_redirect_uri' });
    expect(parseRegistration({ redirect_uris: ['http://evil.example/cb'] })).toMatchObject({
      ok: false,
      error: 'invalid_redirect_uri',
    });
    expect(
      parseRegistration({ redirect_uris: ['https://a.example/cb'], grant_types: ['client_credentials'] }),
    ).toMatchObject({ ok: false, error: 'invalid_client_metadata' });
    expect(parseRegistration({ redirect_uris: ['https://a.example/cb'], client_name: ' Claude\u0000 ' })).toEqual({
      ok: true,
      value: { redirectUris: ['https://a.example/cb'], clientName: 'Claude' },
    });
  });
});

describe('PKCE and scopes', () => {
  it('S256: the verifier must hash to the challenge', () => {
    const verifier = 'a'.repeat(43);
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    expect(verifierMatches(verifier, challenge)).toBe(true);
    expect(verifierMatches('b'.repeat(43), challenge)).toBe(false);
    expect(verifierMatches('short', challenge)).toBe(false);
    expect(verifierMatches(undefined, challenge)).toBe(false);
  });

  it('never grants more than was requested; unknown scopes are dropped', () => {
    expect(requestedScopes('devices:read bogus')).toEqual(['devices:read']);
    expect(requestedScopes(null)).toEqual(['devices:read', 'devices:act', 'devices:lease', 'runs:start']);
    expect(grantedScopes(['devices:act', 'runs:start'], ['devices:read', 'devices:act'])).toEqual(['devices:act']);
  });
});

describe('authorization request', () => {
  const client = { redirectUris: ['http://127.0.0.1:9/cb'] };
  const base = {
    response_type: 'code',
    client_id: 'c',
    redirect_uri: 'http://127.0.0.1:9/cb',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
    resource: MCP,
    state: 'xyz',
  };
  const check = (over: Record<string, string | undefined>, c: typeof client | null = client) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...base, ...over })) if (v !== undefined) p.set(k, v);
    return checkAuthorizationRequest(p, c ?? undefined, MCP);
  };

  it('accepts a well-formed request, keeping state', () => {
    expect(check({})).toMatchObject({ ok: true, request: { state: 'xyz', resource: MCP } });
  });
  it('unknown clients and unregistered redirect URIs are not redirected to', () => {
    expect(check({}, null)).toMatchObject({ ok: false, redirect: false });
    expect(check({ redirect_uri: 'http://127.0.0.1:9/other' })).toMatchObject({ ok: false, redirect: false });
  });
  it('plain or missing PKCE, a foreign resource, a bad response type go back as errors', () => {
    expect(check({ code_challenge_method: 'plain' })).toMatchObject({
      redirect: true,
      error: 'invalid_request',
      state: 'xyz',
    });
    expect(check({ code_challenge: undefined })).toMatchObject({ redirect: true, error: 'invalid_request' });
    expect(check({ resource: 'https://other.example/mcp' })).toMatchObject({ redirect: true, error: 'invalid_target' });
    expect(check({ resource: undefined })).toMatchObject({ redirect: true, error: 'invalid_target' });
    expect(check({ response_type: 'token' })).toMatchObject({ redirect: true, error: 'unsupported_response_type' });
  });
  it('redirectWith keeps the client query and encodes values', () => {
    expect(redirectWith('http://127.0.0.1:9/cb?x=1', { code: 'a b', state: null })).toBe(
      'http://127.0.0.1:9/cb?x=1&code=a+b',
    );
  });
});

describe('web rules', () => {
  it('same origin: Origin must match; without it Sec-Fetch-Site must be same-origin; neither is refused', () => {
    const o = 'https://relay.example';
    expect(sameOrigin({ origin: o }, o)).toBe(true);
    expect(sameOrigin({ origin: 'null', 'sec-fetch-site': 'same-origin' }, o)).toBe(false);
    expect(sameOrigin({ 'sec-fetch-site': 'same-origin' }, o)).toBe(true);
    expect(sameOrigin({ 'sec-fetch-site': 'cross-site' }, o)).toBe(false);
    expect(sameOrigin({}, o)).toBe(false);
  });
  it('CSRF: bound to the session when signed in, the double-submit cookie before', () => {
    const before = parseCookies('pb_csrf=abc');
    expect(csrfMatches(before, 'abc')).toBe(true);
    expect(csrfMatches(before, 'abd')).toBe(false);
    expect(csrfMatches(before, null)).toBe(false);
    const signedIn = parseCookies('pb_csrf=abc; pb_session=s1');
    expect(csrfMatches(signedIn, 'abc')).toBe(false);
    expect(csrfMatches({}, '')).toBe(false);
  });
  it('cookies are HttpOnly and SameSite=Lax always, Secure and __Host- on https', () => {
    expect(setCookie('pb_session', 'v', { secure: true, maxAgeS: 60 })).toBe(
      '__Host-pb_session=v; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=60',
    );
    expect(setCookie('pb_csrf', 'v', { secure: false })).toBe('pb_csrf=v; Path=/; HttpOnly; SameSite=Lax');
  });
  it('after sign-in, only paths under /account of this relay', () => {
    expect(safeNext('/account/authorize?x=1')).toBe('/account/authorize?x=1');
    for (const bad of ['https://evil.example/', '//evil.example/account', '/other', null, '/account\\@evil'])
      expect(safeNext(bad)).toBe('/account');
  });
});
