// The OAuth 2.1 authorization server for MCP clients (MCP authorization, revision 2025-11-25):
// discovery (RFC 9728, RFC 8414), dynamic registration (RFC 7591), the consent page and the token
// endpoint. The rules are in oauth-rules.ts; tokens are ordinary device tokens (docs/decisions/0070-hosted-accounts-and-oauth.md).
import type { GatewayContext } from '../gateway/context.ts';
import type { OAuthClient, RefreshResult } from '../store/hosted-types.ts';
import { SCOPES, type Account, type Scope } from '../store/types.ts';
import { newApiToken, newId, sha256Hex } from '../crypto/secrets.ts';
import { BadInput, handle, type HostedRequest, type HostedRoutes } from './request.ts';
import { rateLimited } from '../metrics.ts';
import { logValue } from '../log.ts';
import {
  ACCESS_TOKEN_TTL_MS,
  AUTHORIZATION_CODE_TTL_MS,
  checkAuthorizationRequest,
  clientTrust,
  grantedScopes,
  isLoopbackRedirect,
  parseRegistration,
  redirectWith,
  REFRESH_TOKEN_TTL_MS,
  REGISTRATION_LIMIT,
  REGISTRATION_WINDOW_MS,
  verifierMatches,
} from './oauth-rules.ts';
import { esc, hashSecret, hidden, newSecret } from './web.ts';
import type { ClientMetadataFetcher } from './client-metadata.ts';
import { FETCH_LIMIT, FETCH_WINDOW_MS, isMetadataClientId } from './client-metadata-rules.ts';
import { essence } from '../protocol/media-types.ts';

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource/mcp';

/** Discovery documents and the token endpoint are read by clients on any origin (no cookies). */
const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type, Authorization, Mcp-Protocol-Version',
  'Access-Control-Max-Age': '600',
};

/** The resource_metadata attribute of a hosted relay's 401 on /mcp. */
export function resourceMetadataUrl(publicUrl: string): string {
  return `${publicUrl}${PROTECTED_RESOURCE_PATH}`;
}

export function registerOAuthRoutes(app: HostedRoutes, ctx: GatewayContext, metadata: ClientMetadataFetcher): void {
  const base = () => ctx.config.publicUrl;
  const resourceMetadata = handle(ctx, (r) =>
    r.jsonResponse(
      200,
      {
        resource: `${base()}/mcp`,
        authorization_servers: [base()],
        scopes_supported: SCOPES,
        bearer_methods_supported: ['header'],
        resource_name: 'phonebridge',
      },
      CORS,
    ),
  );
  // A CORS preflight answered wherever the CORS headers are: a browser asks before a GET with a
  // header outside the safelisted ones (Mcp-Protocol-Version), and without a 204 never sends it.
  const preflight = handle(ctx, (r) => r.send(204, CORS));
  /** A document read cross-origin: its GET and the preflight for it. */
  const corsGet = (path: string, handler: ReturnType<typeof handle>) => {
    app.get(path, handler);
    app.options(path, preflight);
  };
  corsGet(PROTECTED_RESOURCE_PATH, resourceMetadata);
  corsGet('/.well-known/oauth-protected-resource', resourceMetadata);
  corsGet(
    '/.well-known/oauth-authorization-server',
    handle(ctx, (r) =>
      r.jsonResponse(
        200,
        {
          issuer: base(),
          authorization_endpoint: `${base()}/account/authorize`,
          token_endpoint: `${base()}/oauth/token`,
          registration_endpoint: `${base()}/oauth/register`,
          response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['none'],
          scopes_supported: SCOPES,
          authorization_response_iss_parameter_supported: true,
          client_id_metadata_document_supported: true,
        },
        CORS,
      ),
    ),
  );
  for (const path of ['/oauth/register', '/oauth/token']) app.options(path, preflight);
  app.post(
    '/oauth/register',
    handle(ctx, (r) => register(r), { body: true, oauth: { error: 'invalid_client_metadata', headers: CORS } }),
  );
  app.post(
    '/oauth/token',
    handle(ctx, (r) => token(r), {
      body: true,
      oauth: { error: 'invalid_request', headers: CORS },
      headers: ['authorization'],
    }),
  );
  // RFC 6749 §3.2: access token requests are POSTs.
  app.otherMethods(
    '/oauth/token',
    handle(ctx, (r) =>
      r.jsonResponse(
        405,
        { error: 'invalid_request', error_description: 'the token endpoint takes POST' },
        { ...CORS, Allow: 'POST, OPTIONS' },
      ),
    ),
  );
  app.get(
    '/account/authorize',
    handle(ctx, (r) => authorizePage(r, metadata)),
  );
  app.post(
    '/account/authorize',
    handle(ctx, (r) => decide(r, metadata), { body: true }),
  );
}

async function register(r: HostedRequest): Promise<void> {
  const n = await r.ctx.bus.hit(`oauthreg:${r.ip}`, REGISTRATION_WINDOW_MS);
  if (n > REGISTRATION_LIMIT) {
    rateLimited.oauth_registrations.inc();
    return r.jsonResponse(
      429,
      { error: 'rate_limited', error_description: 'too many registrations from this address; try again later' },
      { ...CORS, 'Retry-After': String(REGISTRATION_WINDOW_MS / 1000) },
    );
  }
  let body: unknown;
  try {
    body = await r.json();
  } catch (err) {
    if (err instanceof BadInput) throw err;
    return r.jsonResponse(400, { error: 'invalid_client_metadata', error_description: 'body must be JSON' }, CORS);
  }
  const parsed = parseRegistration(body);
  if (!parsed.ok) return r.jsonResponse(400, { error: parsed.error, error_description: parsed.description }, CORS);
  const client = await r.ctx.store.hosted.registerOAuthClient({
    id: newId('client'),
    name: parsed.value.clientName,
    redirectUris: parsed.value.redirectUris,
  });
  r.ctx.log.info({ clientId: client.id }, 'oauth client registered');
  r.jsonResponse(
    201,
    {
      client_id: client.id,
      client_id_issued_at: Math.floor(client.createdAt.getTime() / 1000),
      client_name: client.name,
      redirect_uris: client.redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      // Public clients only: PKCE is the proof, there is no secret to keep.
      token_endpoint_auth_method: 'none',
    },
    CORS,
  );
}

/**
 * Validates the request's parameters (query on GET, form on POST); answers itself when they are
 * bad. `acted`: the person pressed a button on our page, so an error may go back to the client at
 * once. Otherwise (a link someone was sent) the error stays on this relay's page: signed out, with
 * no way onwards; signed in, with a link that names the client's host (RFC 9700 §4.11.2,
 * docs/decisions/0161-consent-that-names-where-the-code-goes.md).
 */
async function validated(r: HostedRequest, params: URLSearchParams, acted: boolean, metadata: ClientMetadataFetcher) {
  const clientId = params.get('client_id') ?? '';
  let client: OAuthClient | undefined;
  if (isMetadataClientId(clientId)) {
    const found = await metadataClient(r, clientId, metadata);
    if (!found.ok) {
      r.page(
        400,
        'Cannot connect',
        `<p class="error" role="alert">This connection request is invalid: ${esc(found.reason)}.</p><p class="muted">Client id <code>${esc(clientId)}</code></p>`,
      );
      return undefined;
    }
    client = found.client;
  } else {
    client = await r.ctx.store.hosted.getOAuthClient(clientId);
  }
  const check = checkAuthorizationRequest(params, client, `${r.ctx.config.publicUrl}/mcp`);
  if (check.ok) return { request: check.request, client: client! };
  if (!check.redirect) {
    r.page(
      400,
      'Cannot connect',
      `<p class="error" role="alert">This connection request is invalid: ${esc(check.description)}.</p>`,
    );
    return undefined;
  }
  const back = redirectWith(check.redirectUri, {
    error: check.error,
    error_description: check.description,
    state: check.state,
    iss: r.ctx.config.publicUrl,
  });
  if (acted) {
    hop(r, back);
    return undefined;
  }
  const account = await r.account();
  const onwards = account
    ? `<p><a data-testid="return" href="${esc(back)}">Return to ${esc(new URL(check.redirectUri).host)}</a> to tell the application.</p>`
    : '<p><a href="/account">Go to your phones</a></p>';
  r.page(
    400,
    'Cannot connect',
    `<p class="error" role="alert">This connection request is invalid: ${esc(check.description)}.</p>${onwards}`,
    account ? { signedIn: account.email ?? account.id } : {},
  );
  return undefined;
}

/**
 * A client whose id is the URL of its metadata document: the document (cached, or fetched through
 * the guard of client-metadata.ts), kept in the store as a client row so that codes and grants can
 * name it and the token endpoint finds it. A fetch is counted per client address (anyone can make
 * the relay fetch by opening an authorize URL); a document from the cache costs nothing.
 */
async function metadataClient(
  r: HostedRequest,
  url: string,
  metadata: ClientMetadataFetcher,
): Promise<{ ok: true; client: OAuthClient } | { ok: false; reason: string }> {
  const got = await metadata.get(
    url,
    async () => (await r.ctx.bus.hit(`cimd:${r.ip}`, FETCH_WINDOW_MS)) <= FETCH_LIMIT,
  );
  if (!got.ok) {
    // Both hold what the client sent (its URL, or the document's values in a reason): cut as every
    // client-supplied value is (src/log.ts logValue; docs/SECURITY.md).
    r.ctx.log.info(
      { clientId: logValue(url), reason: logValue(got.detail ?? got.reason) },
      'client metadata document refused',
    );
    return got;
  }
  const { clientId, clientName, redirectUris } = got.client;
  const stored = got.cached ? await r.ctx.store.hosted.getOAuthClient(clientId) : undefined;
  const client =
    stored ?? (await r.ctx.store.hosted.putMetadataClient({ id: clientId, name: clientName, redirectUris }));
  // The document, not the row, is what this request is checked against.
  return { ok: true, client: { ...client, name: clientName, redirectUris } };
}

const AUTH_PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'code_challenge',
  'code_challenge_method',
  'scope',
  'state',
  'resource',
];

async function authorizePage(r: HostedRequest, metadata: ClientMetadataFetcher): Promise<void> {
  const v = await validated(r, r.query, false, metadata);
  if (!v) return;
  const account = await r.account();
  if (!account)
    return r.redirect(`/account/signin?next=${encodeURIComponent(`/account/authorize?${r.query.toString()}`)}`);
  await consentPage(r, account, v.client, v.request.redirectUri, r.query.get('scope') ? v.request.scopes : undefined);
}

/** What each scope lets a client do, in words (the consent page shows both). */
export const SCOPE_WORDS: Record<Scope, string> = {
  'devices:read': 'see the screen and which apps are open',
  'devices:act': 'tap and type, swipe, press keys and open apps',
  'devices:lease': 'take the phone for itself while others wait',
  'runs:start': 'start and stop automated runs on the phone',
};

async function consentPage(
  r: HostedRequest,
  account: Account,
  client: OAuthClient,
  redirectUri: string,
  /** What the request asked for; undefined: it named no scope, so only reading is ticked. */
  asked: Scope[] | undefined,
): Promise<void> {
  const devices = await r.ctx.store.listDevices(account.id);
  const carried = AUTH_PARAMS.map((k) => hidden(k, r.query.get(k))).join('');
  const phones = devices
    .map(
      (d, i) =>
        `<label><input type="radio" name="device" value="${esc(d.id)}"${i === 0 ? ' checked' : ''}> ${esc(d.name)}</label><br>`,
    )
    .join('');
  const offered = asked ?? [...SCOPES];
  const ticked = new Set<Scope>(asked ?? ['devices:read']);
  const scopes = offered
    .map(
      (s) =>
        `<label><input type="checkbox" name="grant_scope" value="${esc(s)}"${ticked.has(s) ? ' checked' : ''}> ${esc(SCOPE_WORDS[s])} <span class="muted">(${esc(s)})</span></label><br>`,
    )
    .join('');
  const target = new URL(redirectUri);
  const loopback = isLoopbackRedirect(target);
  r.page(
    200,
    'Connect a client',
    `<p>An application calling itself <strong>${esc(client.name)}</strong> <span class="badge" data-testid="client-trust">${esc(clientTrust(client))}</span> asks to use one of your phones through <code>${esc(r.ctx.config.publicUrl)}/mcp</code>.</p>
<p class="target">If you allow it, access goes to <strong class="host" data-testid="redirect-host">${esc(target.host)}</strong>${loopback ? ' (an application on this computer)' : ''}.</p>
${loopback ? '' : `<p class="error" role="alert" data-testid="remote-redirect-warning">${esc(target.host)} is a server on the internet, not an application on this computer. Allow only if you expected to connect it.</p>`}
${
  isMetadataClientId(client.id)
    ? `<p class="muted" data-testid="client-document">Client id <code>${esc(client.id)}</code>. Its name and where access may go come from a document published at <strong>${esc(new URL(client.id).host)}</strong>: whoever runs ${esc(new URL(client.id).host)} chose them; this relay has not verified who that is.${loopback ? ' Any program on this computer can present this client id: allow only if you just started this application here.' : ''}</p>`
    : `<p class="muted">Client id <code>${esc(client.id)}</code>. Its name is chosen by whoever registered it; the host above is where the access really goes.</p>`
}
<form method="post" action="/account/authorize">${hidden('csrf', r.csrf())}${carried}
${devices.length ? `<fieldset><legend>Phone</legend>${phones}</fieldset><fieldset><legend>Allow it to</legend>${scopes}</fieldset>` : '<p class="error">You have no phone yet: pair one on the dashboard first.</p>'}
${devices.length ? '<button type="submit" name="decision" value="allow" class="primary">Allow</button>' : ''}
<button type="submit" name="decision" value="deny">Deny</button>
</form>`,
    { signedIn: account.email ?? account.id },
  );
}

async function decide(r: HostedRequest, metadata: ClientMetadataFetcher): Promise<void> {
  const form = await r.checkStateChange();
  if (!form) return;
  const v = await validated(r, form, true, metadata);
  if (!v) return;
  const account = await r.account();
  if (!account) return r.redirect(`/account/signin?next=${encodeURIComponent(`/account/authorize?${pick(form)}`)}`);
  const { request } = v;
  const iss = r.ctx.config.publicUrl;
  if (form.get('decision') !== 'allow') {
    return hop(r, redirectWith(request.redirectUri, { error: 'access_denied', state: request.state, iss }));
  }
  const device = await r.ctx.store.getDevice(form.get('device') ?? '');
  if (!device || device.accountId !== account.id) {
    return r.page(400, 'Pick a phone', '<p class="error" role="alert">Pick one of your phones.</p>', {
      signedIn: account.email ?? account.id,
    });
  }
  if (account.maxKeys !== null && (await r.ctx.store.countCredentials(account.id)) >= account.maxKeys) {
    return r.page(
      403,
      'Plan limit reached',
      `<p class="error" role="alert">The account is at its plan limit of ${esc(account.maxKeys)} API keys, fleet keys and OAuth connections together (limit_reached). Revoke one on the <a href="/account">dashboard</a>, or change the plan.</p>`,
      { signedIn: account.email ?? account.id },
    );
  }
  const scopes = grantedScopes(form.getAll('grant_scope'), request.scopes);
  if (scopes.length === 0) {
    return r.page(400, 'Pick a scope', '<p class="error" role="alert">Allow at least one thing, or press Deny.</p>', {
      signedIn: account.email ?? account.id,
    });
  }
  const code = newSecret();
  await r.ctx.store.hosted.createAuthorizationCode({
    codeHash: hashSecret('authcode', code),
    clientId: request.clientId,
    redirectUri: request.redirectUri,
    codeChallenge: request.codeChallenge,
    resource: request.resource,
    accountId: account.id,
    deviceId: device.id,
    scopes,
    expiresAt: new Date(Date.now() + AUTHORIZATION_CODE_TTL_MS),
  });
  hop(r, redirectWith(request.redirectUri, { code, state: request.state, iss }));
}

function pick(form: URLSearchParams): string {
  const q = new URLSearchParams();
  for (const k of AUTH_PARAMS) {
    const v = form.get(k);
    if (v !== null) q.set(k, v);
  }
  return q.toString();
}

/**
 * The hop back to the client: a page of this relay with a meta refresh (the CSP's form-action
 * 'self' forbids posting to the client, and a 303 from a POST would be the same thing).
 */
function hop(r: HostedRequest, location: string): void {
  r.page(
    200,
    'Returning to the client',
    `<p>Returning to the application… <a href="${esc(location)}">Continue</a></p>`,
    { head: `<meta http-equiv="refresh" content="0;url=${esc(location)}">` },
  );
}

/**
 * The grant an authorization code issues, named after the code (a hash: the id reveals nothing of
 * it), so that a replayed code finds its grant (docs/decisions/0164-grants-count-against-the-key-cap.md).
 */
export function grantIdOf(code: string): string {
  return `grant_${hashSecret('grant', code).slice(0, 32)}`;
}

/** The token request's parameters (RFC 6749 §3.2: none may be sent twice). */
const TOKEN_PARAMS = [
  'grant_type',
  'client_id',
  'code',
  'redirect_uri',
  'code_verifier',
  'refresh_token',
  'scope',
  'resource',
] as const;

/** RFC 6749 §5.2: what an error_description may hold (printable ASCII but `"` and `\`). */
const DESCRIBABLE = /^[\x20\x21\x23-\x5b\x5d-\x7e]{1,60}$/;
const described = (value: string, otherwise: string) => (DESCRIBABLE.test(value) ? value : otherwise);

/** A token request the endpoint refuses whatever its code or refresh token: the §5.2 error. */
interface Refusal {
  error: 'invalid_target' | 'invalid_scope';
  description: string;
}

/** RFC 8707: a `resource`, when given, must be this relay's /mcp. */
function foreignResource(resource: string | undefined, mcpResource: string): Refusal | undefined {
  if (resource === undefined || resource === mcpResource) return undefined;
  return { error: 'invalid_target', description: `resource must be ${mcpResource}` };
}

/** A refresh's `scope` naming a scope this relay does not have. */
function unknownScope(asked: readonly string[]): Refusal | undefined {
  const unknown = asked.find((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown === undefined) return undefined;
  return {
    error: 'invalid_scope',
    description: `unknown scope ${described(unknown, '(unprintable)')}; scopes are ${SCOPES.join(' ')}`,
  };
}

/** The scheme of an Authorization header (RFC 9110 token), to answer with its challenge. */
function authScheme(header: string | undefined): string | undefined {
  if (!header) return undefined;
  return /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,40}(?=\s|$)/.exec(header)?.[0] ?? 'Basic';
}

/**
 * The token endpoint (RFC 6749 §4.1.3, §6; OAuth 2.1). Errors follow §5.2: the code the RFC names
 * for each fault, 400 — 401 with a challenge only for a client that tried the Authorization
 * header —, a specific error_description, never cached. A malformed request (a missing or
 * repeated parameter, a scope beyond the grant) changes nothing, but for a rotated refresh token
 * in it, which revokes its grant whatever else is wrong; a presented code is consumed before it is
 * checked, so a wrong one burns it.
 */
async function token(r: HostedRequest): Promise<void> {
  const fail = (status: number, error: string, description: string, headers: Record<string, string> = {}) =>
    r.jsonResponse(status, { error, error_description: description }, { ...CORS, ...headers });
  const type = essence(r.headers['content-type'] ?? '');
  if (type !== '' && type !== 'application/x-www-form-urlencoded')
    return fail(400, 'invalid_request', 'the body must be application/x-www-form-urlencoded');
  const form = await r.form();
  for (const name of TOKEN_PARAMS)
    if (form.getAll(name).length > 1) return fail(400, 'invalid_request', `${name} is repeated`);
  // RFC 6749 §3.2: a parameter sent without a value is treated as omitted.
  const param = (name: (typeof TOKEN_PARAMS)[number]) => form.get(name) || undefined;
  const grantType = param('grant_type');
  if (!grantType) return fail(400, 'invalid_request', 'grant_type is required');
  const clientId = param('client_id');
  const client = clientId ? await r.ctx.store.hosted.getOAuthClient(clientId) : undefined;
  if (!client) {
    const unknown = `unknown client_id; register the client at ${r.ctx.config.publicUrl}/oauth/register first`;
    // A client that tried HTTP authentication is answered 401 with a challenge of its scheme (§5.2).
    const scheme = authScheme(r.headers.authorization);
    if (scheme)
      return fail(
        401,
        'invalid_client',
        clientId
          ? unknown
          : 'client authentication in the Authorization header is not supported: send client_id in the body (token_endpoint_auth_method none)',
        { 'WWW-Authenticate': `${scheme} realm="phonebridge"` },
      );
    return fail(
      400,
      'invalid_client',
      clientId
        ? unknown
        : 'client_id is required: clients of this server are public and identify themselves with it (token_endpoint_auth_method none)',
    );
  }
  if (grantType !== 'authorization_code' && grantType !== 'refresh_token')
    return fail(
      400,
      'unsupported_grant_type',
      `grant_type ${described(grantType, 'given')} is not supported; use authorization_code or refresh_token`,
    );
  const targetRefusal = foreignResource(param('resource'), `${r.ctx.config.publicUrl}/mcp`);
  const now = new Date();
  const pair = () => {
    const access = newApiToken();
    const refresh = `pbr_${newSecret()}`;
    return {
      access,
      refresh,
      stored: {
        access: { id: newId('oat'), hash: sha256Hex(access), expiresAt: new Date(now.getTime() + ACCESS_TOKEN_TTL_MS) },
        refresh: { hash: hashSecret('refresh', refresh), expiresAt: new Date(now.getTime() + REFRESH_TOKEN_TTL_MS) },
      },
    };
  };
  const answer = (access: string, refresh: string, scopes: string[]) =>
    r.jsonResponse(
      200,
      {
        access_token: access,
        token_type: 'Bearer',
        expires_in: ACCESS_TOKEN_TTL_MS / 1000,
        refresh_token: refresh,
        scope: scopes.join(' '),
      },
      { ...CORS, Pragma: 'no-cache' },
    );

  if (grantType === 'authorization_code') {
    if (targetRefusal) return fail(400, targetRefusal.error, targetRefusal.description);
    const code = param('code');
    if (!code) return fail(400, 'invalid_request', 'code is required');
    const redirectUri = param('redirect_uri');
    if (!redirectUri)
      return fail(400, 'invalid_request', 'redirect_uri is required: the one the authorization request named');
    const verifier = param('code_verifier');
    if (!verifier) return fail(400, 'invalid_request', 'code_verifier is required (PKCE)');
    // Consumed before any other check: a code is good for one try, right or wrong.
    const stored =
      code.length <= 100
        ? await r.ctx.store.hosted.consumeAuthorizationCode(hashSecret('authcode', code), now)
        : undefined;
    if (!stored) {
      // A code presented again: whatever it issued is revoked (OAuth 2.1 §4.1.3). The grant's id
      // is derived from the code, so only a holder of the code can reach it.
      if (code.length <= 100 && (await r.ctx.store.hosted.revokeOAuthGrant(grantIdOf(code)))) {
        r.ctx.log.warn({ clientId: logValue(client.id) }, 'authorization code replayed: its grant revoked');
        return fail(400, 'invalid_grant', 'the code was already used; what it issued is revoked');
      }
      return fail(400, 'invalid_grant', 'the code is unknown, expired or already used');
    }
    if (stored.clientId !== client.id) return fail(400, 'invalid_grant', 'the code was issued to another client');
    if (redirectUri !== stored.redirectUri)
      return fail(400, 'invalid_grant', 'redirect_uri does not match the authorization request');
    if (!verifierMatches(verifier, stored.codeChallenge))
      return fail(400, 'invalid_grant', 'code_verifier does not match the code_challenge');
    const p = pair();
    const issued = await r.ctx.store.hosted.issueOAuthGrant({
      grantId: grantIdOf(code),
      accountId: stored.accountId,
      clientId: client.id,
      deviceId: stored.deviceId,
      scopes: stored.scopes,
      ...p.stored,
    });
    if (!issued.ok)
      return fail(
        400,
        'invalid_grant',
        issued.error === 'limit_reached'
          ? 'the account is at its plan limit for API keys, fleet keys and OAuth connections'
          : 'the phone of this authorization was removed',
      );
    r.ctx.log.info(
      { clientId: logValue(client.id), accountId: stored.accountId, deviceId: stored.deviceId },
      'oauth grant issued',
    );
    return answer(p.access, p.refresh, stored.scopes);
  }
  // refresh_token, the one grant type left
  const presented = param('refresh_token');
  if (!presented) return fail(400, 'invalid_request', 'refresh_token is required');
  // RFC 6749 §6: a scope may narrow what the grant gave, never widen it; none means all of it.
  const asked = (param('scope') ?? '').split(' ').filter(Boolean);
  // A request refused for its resource or an unknown scope still goes to the store first: a
  // rotated refresh token revokes its grant whatever else is wrong (OAuth 2.1 §4.3.1, RFC 9700
  // §4.14.2); a live one rotates nothing.
  const refusal = targetRefusal ?? unknownScope(asked);
  const p = pair();
  const result: RefreshResult =
    presented.length > 200
      ? { ok: false, error: 'invalid' }
      : await r.ctx.store.hosted.refreshOAuthGrant({
          refreshHash: hashSecret('refresh', presented),
          clientId: client.id,
          now,
          scopes: asked.length ? SCOPES.filter((s) => asked.includes(s)) : undefined,
          refused: refusal !== undefined,
          ...p.stored,
        });
  const reused = !result.ok && result.error === 'reused';
  if (refusal && !reused) return fail(400, refusal.error, refusal.description);
  if (!result.ok && result.error === 'scope')
    return fail(
      400,
      'invalid_scope',
      `scope may only narrow the grant (${result.granted.join(' ')}); not granted: ${SCOPES.filter((s) => asked.includes(s) && !result.granted.includes(s)).join(' ')}`,
    );
  if (!result.ok) {
    if (result.error === 'reused')
      r.ctx.log.warn({ clientId: logValue(client.id) }, 'rotated refresh token presented again: grant revoked');
    return fail(
      400,
      'invalid_grant',
      result.error === 'reused'
        ? 'the refresh token was already used; the grant is revoked'
        : 'the refresh token is unknown, expired or revoked',
    );
  }
  return answer(p.access, p.refresh, result.token.scopes);
}
