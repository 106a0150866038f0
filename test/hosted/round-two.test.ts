// Hosted mode's second security round over plain HTTP (a browser without JavaScript): sign-in
// limits nobody else can spend, authorize errors that never leave the relay unasked, consent that
// names where the code goes, and the OAuth limits. Real relay, real Postgres, real SMTP sink.
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { startTestRelay } from '../helpers/relay.ts';
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

/** The relay's log lines at warn and above (the NUL test checks that nothing reached error). */
const logLines: { level: number; msg: string }[] = [];

const h = useHostedRelay({
  args: ['--trust-proxy', '--control-poll-ms', '50'],
  relayOptions: {
    log: createLogger({
      level: 'warn',
      destination: {
        write: (line: string) => void logLines.push(JSON.parse(line) as { level: number; msg: string }),
      },
    }),
  },
});

const addr = clientAddress;
const email = () => newEmail();

async function askLink(web: WebClient, who: string, next?: string) {
  const form = await web.get('/account/signin');
  return web.post('/account/signin', { csrf: csrfOf(form.html), email: who, ...(next ? { next } : {}) });
}

const signedInWithPhone = () => signedIn(h);

const registerClient = (web: WebClient, redirectUris = [CALLBACK], name = 'Round two') =>
  register(h.relay.url, web.forwardedFor ?? addr(), { redirectUris, name });
const authorizeQuery = (clientId: string, challenge: string, extra: Record<string, string> = {}) =>
  authorizeParams(h.relay.url, clientId, challenge, extra);
const tokenRequest = (params: Record<string, string>) => token(h.relay.url, params);

describe('sign-in limits', () => {
  it('an address over its own limit spends nothing of another email; one address cannot lock an email out', async () => {
    const victim = email();
    const attacker = new WebClient(h.relay.url, undefined, addr());
    // The attacker's own budget, spent on addresses of its own.
    for (let i = 0; i < 10; i++) expect((await askLink(attacker, email())).status).toBe(200);
    // Over its limit now: these are refused and must not count against the victim.
    for (let i = 0; i < 6; i++) expect((await askLink(attacker, victim)).status).toBe(429);
    expect((await askLink(new WebClient(h.relay.url, undefined, addr()), victim)).status).toBe(200);

    // A fresh address that spends everything it may on the victim still cannot lock the victim out.
    const second = new WebClient(h.relay.url, undefined, addr());
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await askLink(second, victim)).status);
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(statuses[5]).toBe(429);
    const own = new WebClient(h.relay.url, undefined, addr());
    expect((await askLink(own, victim)).status).toBe(200);
  });
});

describe('authorize errors and consent', () => {
  it('an authorize error never sends a browser to the redirect URI by itself (signed out or in)', async () => {
    const web = new WebClient(h.relay.url, undefined, addr());
    const client = await registerClient(web, ['https://evil.example/phish']);
    const q = authorizeQuery(client.body.client_id, pkce().challenge, {
      redirect_uri: 'https://evil.example/phish',
      response_type: 'token',
    });
    const anonymous = await new WebClient(h.relay.url, undefined, addr()).get(`/account/authorize?${q.toString()}`);
    expect(anonymous.location).toBeNull();
    expect(anonymous.html).not.toContain('http-equiv="refresh"');
    expect(anonymous.html).not.toContain('evil.example/phish');
    expect(anonymous.status).toBe(400);
    expect(anonymous.html).toContain('response_type must be code');

    const { web: signedIn } = await signedInWithPhone();
    const page = await signedIn.get(`/account/authorize?${q.toString()}`);
    expect(page.html).not.toContain('http-equiv="refresh"');
    // Signed in, the person may go back to the client, by pressing a link that names its host.
    const back = /<a data-testid="return" href="([^"]+)"/.exec(page.html);
    expect(back).not.toBeNull();
    expect(new URL(back![1].replace(/&amp;/g, '&')).searchParams.get('error')).toBe('unsupported_response_type');
    expect(page.html).toContain('evil.example');
  });

  it('a mailed link carries next only into the browser that asked for it; consent names the redirect host, unverified', async () => {
    const { web: victimWeb, who, phone } = await signedInWithPhone();
    const attacker = new WebClient(h.relay.url, undefined, addr());
    const client = await registerClient(attacker, ['https://evil.example/cb'], 'Claude');
    const q = authorizeQuery(client.body.client_id, pkce().challenge, { redirect_uri: 'https://evil.example/cb' });
    const next = `/account/authorize?${q.toString()}`;
    // The attacker makes the relay mail the victim a genuine link with the attacker's next.
    expect((await askLink(attacker, who, next)).status).toBe(200);
    const link = new URL(await h.sink.nextLink(who));
    const victim = new WebClient(h.relay.url, undefined, addr());
    const page = await victim.get(link.pathname + link.search);
    const done = await victim.post('/account/signin/link', {
      csrf: csrfOf(page.html),
      code: link.searchParams.get('code')!,
    });
    expect(done).toMatchObject({ status: 303, location: '/account' });

    // The browser that asked does get its next.
    const own = new WebClient(h.relay.url, undefined, addr());
    expect((await askLink(own, who, next)).status).toBe(200);
    const ownLink = new URL(await h.sink.nextLink(who));
    const ownPage = await own.get(ownLink.pathname + ownLink.search);
    const ownDone = await own.post('/account/signin/link', {
      csrf: csrfOf(ownPage.html),
      code: ownLink.searchParams.get('code')!,
    });
    expect(ownDone).toMatchObject({ status: 303, location: next });

    // The consent page says where the code goes, that the client is unverified, and warns off-loopback.
    const consent = await victimWeb.get(next);
    expect(consent.status).toBe(200);
    expect(consent.html).toMatch(/data-testid="redirect-host">evil\.example</);
    expect(consent.html).toMatch(/unverified/i);
    expect(consent.html).toMatch(/data-testid="remote-redirect-warning"/);
    // Without scope in the request, only reading is ticked; each scope says in words what it allows.
    const noScope = new URLSearchParams(q);
    noScope.delete('scope');
    const ticked = await victimWeb.get(`/account/authorize?${noScope.toString()}`);
    expect([...ticked.html.matchAll(/value="([a-z:]+)" checked/g)].map((m) => m[1])).toEqual(['devices:read']);
    expect(ticked.html).toContain('see the screen');
    expect(ticked.html).toContain('tap and type');
    expect(formFields(ticked.html, '/account/authorize').client_id).toBe(client.body.client_id);
    expect(phone.deviceId).toBeTruthy();
  });

  it('signed out, the sign-in page says that a client is waiting for consent', async () => {
    const web = new WebClient(h.relay.url, undefined, addr());
    const client = await registerClient(web, [CALLBACK], 'Waiting Client');
    const q = authorizeQuery(client.body.client_id, pkce().challenge);
    const r = await web.get(`/account/authorize?${q.toString()}`);
    expect(r.status).toBe(303);
    const form = await web.get(r.location!);
    expect(form.html).toContain('Waiting Client');
    expect(form.html).toMatch(/waiting for your consent/);
  });
});

async function mcpInit(token: string): Promise<number> {
  const r = await bearerInitialize(h.relay.url, token);
  await r.text();
  return r.status;
}

/** A code for a fresh client of this person, exchanged once. */
async function granted(web: WebClient, deviceId: string) {
  const client = await registerClient(web);
  const { verifier, challenge } = pkce();
  const answer = await allowPage(web, authorizeQuery(client.body.client_id, challenge), deviceId);
  const code = hopTarget(answer.html).searchParams.get('code')!;
  const exchange = {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CALLBACK,
    client_id: client.body.client_id,
    code_verifier: verifier,
  };
  return { client, exchange, first: await tokenRequest(exchange) };
}

describe('OAuth limits', () => {
  it('OAuth grants count against the key cap with API keys', async () => {
    const { web, account, phone } = await signedInWithPhone();
    const store = h.relay.relay.store.store;
    await store.setAccountPlan(account.id, { maxDevices: 1, maxKeys: 1 });
    const one = await granted(web, phone.deviceId);
    expect(one.first.status).toBe(200);
    // A second client: the consent refuses it, and so does the store under the token endpoint.
    const client = await registerClient(web);
    const refused = await allowPage(web, authorizeQuery(client.body.client_id, pkce().challenge), phone.deviceId);
    expect(refused.status).toBe(403);
    expect(refused.html).toContain('limit_reached');
    // The page names everything the cap counts, fleet keys included (the store's atKeyCap).
    expect(refused.html).toContain('plan limit of 1 API keys, fleet keys and OAuth connections together');
    expect(await store.hosted.listOAuthGrants(account.id)).toHaveLength(1);
    // An API key is over the cap too while the grant lives.
    const csrf = csrfOf((await web.get('/account')).html);
    const key = await web.post('/account/keys', { csrf, device: phone.deviceId, scope: 'devices:read' });
    expect(key.status).toBe(403);
    expect(key.html).toContain('limit_reached');
    expect(key.html).toContain('plan limit for API keys, fleet keys and OAuth connections together');
  });

  it('a replayed authorization code revokes what its first exchange issued', async () => {
    const { web, phone } = await signedInWithPhone();
    const { exchange, first } = await granted(web, phone.deviceId);
    expect(first.status).toBe(200);
    expect(await mcpInit(first.body.access_token)).toBe(200);
    const replay = await tokenRequest(exchange);
    expect(replay).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    // The first access token and refresh token stop working.
    const deadline = Date.now() + 5_000;
    while ((await mcpInit(first.body.access_token)) !== 401 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(await mcpInit(first.body.access_token)).toBe(401);
    const refreshed = await tokenRequest({
      grant_type: 'refresh_token',
      refresh_token: first.body.refresh_token,
      client_id: exchange.client_id,
    });
    expect(refreshed).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });
});

describe('input refused at the edge', () => {
  it('a NUL anywhere is a 400 (JSON with the OAuth error shape on OAuth endpoints), never a 500 or an error log line', async () => {
    const { web, phone } = await signedInWithPhone();
    const errorsBefore = logLines.filter((l) => l.level >= 50).length;
    const anon = new WebClient(h.relay.url, undefined, addr());
    const form = await anon.get('/account/signin');
    const badEmail = await anon.post('/account/signin', { csrf: csrfOf(form.html), email: 'a\u0000b@example.com' });
    expect(badEmail.status).toBe(400);
    const badNext = await anon.post('/account/signin', {
      csrf: csrfOf(form.html),
      email: email(),
      next: '/account\u0000',
    });
    expect(badNext.status).toBe(400);

    const reg = await fetch(`${h.relay.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': addr() },
      body: JSON.stringify({ client_name: 'x', redirect_uris: ['https://a.example/cb\u0000'] }),
    });
    expect(reg.status).toBe(400);
    expect(reg.headers.get('content-type')).toBe('application/json');
    expect((await reg.json()).error).toBe('invalid_client_metadata');

    const csrf = csrfOf((await web.get('/account')).html);
    expect((await web.post('/account/pair', { csrf, name: 'my\u0000phone' })).status).toBe(400);

    const authorize = await web.get(`/account/authorize?client_id=%00&redirect_uri=${encodeURIComponent(CALLBACK)}`);
    expect(authorize.status).toBe(400);

    const tok = await tokenRequest({ grant_type: 'authorization_code', client_id: 'client_\u0000', code: 'x' });
    expect(tok.status).toBe(400);
    expect(tok.type).toBe('application/json');
    expect(tok.body.error).toBe('invalid_request');

    expect(logLines.filter((l) => l.level >= 50).length).toBe(errorsBefore);
    expect(phone.deviceId).toBeTruthy();
  });
});

describe('a forwarded magic link', () => {
  it('names the account it signs into, and asks before replacing a different signed-in account', async () => {
    const { web: bob, who: bobEmail } = await signedInWithPhone();
    const mallory = email();
    const malloryWeb = new WebClient(h.relay.url, undefined, addr());
    expect((await askLink(malloryWeb, mallory)).status).toBe(200);
    const link = new URL(await h.sink.nextLink(mallory));
    const page = await bob.get(link.pathname + link.search);
    expect(page.html).toMatch(new RegExp(`data-testid="link-account">${mallory.replace('.', '\\.')}<`));
    expect(page.html).toContain('data-testid="account-switch"');
    expect(page.html).toContain(bobEmail);
    // A "Sign in" press without the switch (an older page, a script) is asked again, and changes nothing.
    const session = bob.jar.get('pb_session');
    const pressed = await bob.post('/account/signin/link', {
      csrf: csrfOf(page.html),
      code: link.searchParams.get('code')!,
    });
    expect(pressed.status).toBe(409);
    expect(bob.jar.get('pb_session')).toBe(session);
    expect((await bob.get('/account')).html).toContain(bobEmail);
    // Confirmed: the switch happens, and the page said to whom.
    const confirmed = await bob.post('/account/signin/link', {
      ...formFields(pressed.html, '/account/signin/link'),
    });
    expect(confirmed.status).toBe(303);
    expect((await bob.get('/account')).html).toContain(mallory);
  });
});

describe('cookies on https', () => {
  it('session and CSRF cookies are __Host- prefixed (Secure, Path=/, no Domain); a plain planted one is ignored', async () => {
    const secure = await startTestRelay([
      '--hosted',
      '--trust-proxy',
      '--database-url',
      h.db.url,
      '--smtp-url',
      h.sink.url,
      '--public-url',
      'https://relay.example',
    ]);
    try {
      const base = `http://127.0.0.1:${secure.relay.node.port}`;
      const web = new WebClient(base, 'https://relay.example', addr());
      const form = await web.get('/account/signin');
      const csrfCookie = form.res.headers.getSetCookie().find((c) => c.includes('pb_csrf='))!;
      expect(csrfCookie).toMatch(/^__Host-pb_csrf=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Secure$/);
      const who = email();
      await web.signIn(who, h.sink);
      const session = [...web.jar.keys()].filter((k) => k.includes('pb_session'));
      expect(session).toEqual(['__Host-pb_session']);
      expect((await web.get('/account')).status).toBe(200);
      // A sibling subdomain can set a plain pb_session for the parent domain: it is not a session here.
      const planted = new WebClient(base, 'https://relay.example', addr());
      planted.jar.set('pb_session', web.jar.get('__Host-pb_session')!);
      expect((await planted.get('/account')).status).toBe(303);
    } finally {
      await secure.stop();
    }
  });
});

describe('what real clients tripped over', () => {
  it('dashboard: "now" for an online phone; OAuth rows show client id, redirect host and last token; favicon; pairing payload', async () => {
    const { web, phone } = await signedInWithPhone();
    const { client, first } = await granted(web, phone.deviceId);
    expect(first.status).toBe(200);
    const dash = await web.get('/account');
    const row = new RegExp(`<td class="online">online</td>\\s*<td>now</td>`);
    expect(dash.html).toMatch(row);
    const grantCell = /data-testid="grant-client">([^<]+)</.exec(dash.html)![1];
    expect(grantCell).toContain(client.body.client_id);
    expect(grantCell).toContain('127.0.0.1:4567');
    expect(/data-testid="grant-last-use">([^<]+)</.exec(dash.html)![1]).toMatch(/UTC$/);
    const icon = await fetch(`${h.relay.url}/favicon.ico`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toMatch(/^image\//);
    const paired = await web.post('/account/pair', { csrf: csrfOf(dash.html), name: 'second' });
    const payload = /data-testid="pairing-payload">([^<]+)</.exec(paired.html)![1].replace(/&quot;/g, '"');
    expect(JSON.parse(payload)).toMatchObject({ v: 1, relay: h.relay.url });
    const phonesJson = await web.get('/account/phones.json');
    expect(phonesJson.status).toBe(200);
    expect((JSON.parse(phonesJson.html) as { id: string; online: boolean }[])[0]).toMatchObject({
      id: phone.deviceId,
      online: true,
    });
  });
});
