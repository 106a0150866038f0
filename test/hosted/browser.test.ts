// Hosted mode as a person and an MCP client see it: headless Chromium (playwright-core) signs in
// by a magic link that a real SMTP server received, uses the dashboard, and approves an OAuth
// connection that the official SDK client's auth support (OAuthClientProvider, loopback redirect)
// drives. Two gateway nodes share Postgres and Redis: what one node does holds on the other.
// Screenshots go to .tmp/hosted-screens/.
import { createServer, type Server } from 'node:http';
import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './browser.ts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  discoverAuthorizationServerMetadata,
  refreshAuthorization,
  UnauthorizedError,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { waitFor, type TestRelay } from '../helpers/relay.ts';
import { startHostedRelay, type HostedRelay } from './hosted-relay.ts';
import {
  csrfOf,
  startAccountPhone,
  startPhoneWithQr,
  TestOAuthProvider,
  WebClient,
  type HostedPhone,
  type SmtpSink,
} from './helpers.ts';

const SCREENS = '.tmp/hosted-screens';
let h: HostedRelay;
let node1: TestRelay;
let node2: TestRelay;
/** The cluster's one public URL (a round-robin TCP front, as a load balancer would be). */
let FRONT: string;
/** Each node reached directly, for checks that must hold on every node. */
let direct1: string;
let direct2: string;
let sink: SmtpSink;
let browser: Browser;
let phones: HostedPhone[];

beforeAll(async () => {
  mkdirSync(SCREENS, { recursive: true });
  h = await startHostedRelay({ nodes: 2, args: ['--control-poll-ms', '50'] });
  [node1, node2] = h.nodes;
  ({ url: FRONT, sink, phones } = h);
  direct1 = `http://127.0.0.1:${node1.relay.node.port}`;
  direct2 = `http://127.0.0.1:${node2.relay.node.port}`;
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await h?.stop();
});

async function signIn(page: Page, email: string): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
  await page.getByText('Check your email').waitFor();
  await page.goto(await sink.nextLink(email));
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
}

async function mcpStatus(base: string, token: string): Promise<number> {
  const r = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', clientInfo: { name: 'status-probe', version: '1.0' } },
    }),
  });
  await r.text();
  return r.status;
}

/** The loopback redirect target of a native MCP client. */
async function callbackServer(): Promise<{ url: string; code: Promise<string>; server: Server }> {
  let resolve!: (c: string) => void;
  const code = new Promise<string>((r) => (resolve = r));
  const server = createServer((req, res) => {
    const u = new URL(req.url!, 'http://127.0.0.1');
    res.end('You can close this window.');
    const c = u.searchParams.get('code');
    if (c) resolve(c);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/callback`, code, server };
}

/** Presses Allow and returns the code once the browser has loaded the callback page: the callback
 *  server sees the code before the navigation commits, and a `page.goto` in that window would
 *  interrupt it. */
async function allow(page: Page, cb: { url: string; code: Promise<string> }): Promise<string> {
  await page.getByRole('button', { name: 'Allow' }).click();
  await page.waitForURL((u) => u.href.startsWith(`${cb.url}?`));
  return cb.code;
}

describe('hosted mode in a browser', () => {
  it('OAuth: the SDK client connects by URL alone; Chromium signs in and presses Allow; tools/call works; refresh rotates; reusing the old refresh token revokes the grant on every node', async () => {
    const email = `oauth-${randomBytes(3).toString('hex')}@example.com`;
    // The person has an account with a phone already (paired earlier).
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(`${FRONT}/account`);
    await signIn(page, email);
    await page.getByRole('heading', { name: 'Your phones' }).waitFor();
    const account = (await node1.relay.store.store.accountByEmail(email))!;
    const phoneA = await startAccountPhone(node1.relay.store.store, FRONT, account.id, 'Pixel A');
    phones.push(phoneA);
    await ctx.clearCookies(); // the OAuth flow below starts signed out

    const cb = await callbackServer();
    try {
      const provider = new TestOAuthProvider({
        name: 'Browser test client',
        scope: 'devices:read devices:act',
        redirectUrl: cb.url,
      });
      const transport = new StreamableHTTPClientTransport(new URL(`${FRONT}/mcp`), { authProvider: provider });
      const client = new Client({ name: 'oauth-test', version: '1.0.0' });
      await expect(client.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
      expect(provider.info?.client_id).toMatch(/^client_/);
      const authUrl = provider.authorizationUrl!;
      expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
      expect(authUrl.searchParams.get('resource')).toBe(`${FRONT}/mcp`);

      // The authorization page lives on any node: open it on node 2.
      await page.goto(authUrl.toString());
      await signIn(page, email);
      await page.getByRole('heading', { name: 'Connect a client' }).waitFor();
      await page.getByLabel('Pixel A').check();
      await page.screenshot({ path: `${SCREENS}/oauth-consent.png`, fullPage: true });
      const code = await allow(page, cb);
      await transport.finishAuth(code);
      expect(provider.saved?.refresh_token).toBeTruthy();

      const t2 = new StreamableHTTPClientTransport(new URL(`${FRONT}/mcp`), { authProvider: provider });
      const c2 = new Client({ name: 'oauth-test', version: '1.0.0' });
      await c2.connect(t2);
      const result = await c2.callTool({ name: 'echo', arguments: { text: 'via oauth' } });
      expect(result.content).toEqual([{ type: 'text', text: 'via oauth' }]);
      await c2.close();

      // Refresh (rotation), then the old refresh token again: the grant is gone everywhere.
      const metadata = (await discoverAuthorizationServerMetadata(FRONT))!;
      const first = provider.saved!;
      const refreshed = await refreshAuthorization(FRONT, {
        metadata,
        clientInformation: provider.info!,
        refreshToken: first.refresh_token!,
        resource: new URL(`${FRONT}/mcp`),
      });
      expect(refreshed.refresh_token).not.toBe(first.refresh_token);
      expect(await mcpStatus(direct1, refreshed.access_token)).toBe(200);
      expect(await mcpStatus(direct2, refreshed.access_token)).toBe(200);
      await expect(
        refreshAuthorization(FRONT, {
          metadata,
          clientInformation: provider.info!,
          refreshToken: first.refresh_token!,
          resource: new URL(`${FRONT}/mcp`),
        }),
      ).rejects.toThrow();
      for (const base of [direct1, direct2]) {
        await waitFor(
          async () => (await mcpStatus(base, refreshed.access_token)) === 401,
          5_000,
          'access token revoked',
        );
        expect(await mcpStatus(base, first.access_token)).toBe(401);
      }
      await expect(
        refreshAuthorization(FRONT, {
          metadata,
          clientInformation: provider.info!,
          refreshToken: refreshed.refresh_token!,
          resource: new URL(`${FRONT}/mcp`),
        }),
      ).rejects.toThrow();
    } finally {
      cb.server.close();
      await ctx.close();
    }
  }, 90_000);

  it('the pairing page shows the payload and notices the phone; consent shows the redirect host and "unverified"; the link page names the account', async () => {
    const email = `r2-${randomBytes(3).toString('hex')}@example.com`;
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    try {
      await page.goto(`${FRONT}/account`);
      await signIn(page, email);
      await page.getByRole('heading', { name: 'Your phones' }).waitFor();
      await page.getByLabel('Phone name').fill('Noticed phone');
      await page.getByRole('button', { name: 'Pair a phone' }).click();
      const payload = JSON.parse((await page.getByTestId('pairing-payload').textContent())!) as {
        v: 1;
        relay: string;
        code: string;
      };
      expect(payload.code).toBe((await page.getByTestId('pairing-code').textContent())!.trim());
      expect(await page.getByTestId('pairing-status').textContent()).toMatch(/Waiting for the phone/);
      const phone = await startPhoneWithQr(payload, 'Noticed phone');
      phones.push(phone);
      // The page's script (under the CSP) polls and says so, without a reload.
      await waitFor(
        async () => /Paired: Noticed phone/.test((await page.getByTestId('pairing-status').textContent()) ?? ''),
        15_000,
        'the pairing page noticed the phone',
      );
      await page.screenshot({ path: `${SCREENS}/pair-noticed.png`, fullPage: true });

      // A client registered by anyone, named like a well-known one, with a server redirect.
      const reg = (await (
        await fetch(`${FRONT}/oauth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ client_name: 'Claude', redirect_uris: ['https://evil.example/cb'] }),
        })
      ).json()) as { client_id: string };
      const q = new URLSearchParams({
        response_type: 'code',
        client_id: reg.client_id,
        redirect_uri: 'https://evil.example/cb',
        code_challenge: 'x'.repeat(43),
        code_challenge_method: 'S256',
        resource: `${FRONT}/mcp`,
      });
      await page.goto(`${FRONT}/account/authorize?${q.toString()}`);
      expect(await page.getByTestId('redirect-host').textContent()).toBe('evil.example');
      expect(await page.getByTestId('client-trust').textContent()).toBe('unverified');
      expect(await page.getByTestId('remote-redirect-warning').isVisible()).toBe(true);
      expect(await page.getByLabel(/see the screen/).isChecked()).toBe(true);
      expect(await page.getByLabel(/tap and type/).isChecked()).toBe(false);
      await page.screenshot({ path: `${SCREENS}/consent-unverified.png`, fullPage: true });

      // Someone else's link, opened in this signed-in browser: it names both accounts and asks.
      const other = `r2-other-${randomBytes(3).toString('hex')}@example.com`;
      const web = new WebClient(FRONT);
      const form = await web.get('/account/signin');
      await web.post('/account/signin', { csrf: csrfOf(form.html), email: other });
      await page.goto(await sink.nextLink(other));
      expect(await page.getByTestId('link-account').textContent()).toBe(other);
      expect(await page.getByTestId('account-switch').textContent()).toContain(email);
      expect(await page.getByRole('button', { name: `Sign out and sign in as ${other}` }).isVisible()).toBe(true);
      await page.screenshot({ path: `${SCREENS}/link-switch.png`, fullPage: true });
    } finally {
      await ctx.close();
    }
  }, 90_000);

  it('dashboard: sign in, pair a phone from the code, see it online, create and revoke a key, see it offline, revoke an OAuth connection, remove the phone; another account sees none of it', async () => {
    const email = `dash-${randomBytes(3).toString('hex')}@example.com`;
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(`${FRONT}/account`);
    await signIn(page, email);
    await page.getByRole('heading', { name: 'Your phones' }).waitFor();

    await page.getByLabel('Phone name').fill('Dashboard phone');
    await page.getByRole('button', { name: 'Pair a phone' }).click();
    await page.getByRole('img', { name: 'Pairing QR code' }).waitFor();
    // The countdown script runs under the CSP (script-src 'self'): the server's "10:00 left" ticks down.
    await waitFor(
      async () => /^9:\d\d left$/.test((await page.locator('[data-expires]').textContent()) ?? ''),
      10_000,
      'countdown ticking',
    );
    await page.screenshot({ path: `${SCREENS}/pair.png`, fullPage: true });
    const code = (await page.getByTestId('pairing-code').textContent())!.trim();
    expect(code).toMatch(/^([A-Z2-7]{4}-){7}[A-Z2-7]{4}$/);
    const phone = await startPhoneWithQr({ v: 1, relay: FRONT, code });
    phones.push(phone);

    // The dashboard on node 2 sees the phone online (held by node 1).
    await page.goto(`${FRONT}/account`);
    const phonesSection = page.getByRole('region', { name: 'Phones' });
    await waitFor(
      async () => {
        await page.reload();
        return (await phonesSection.getByRole('row', { name: /Dashboard phone/ }).textContent())!.includes('online');
      },
      10_000,
      'phone online on the dashboard',
    );

    const keys = page.getByRole('region', { name: 'API keys' });
    await keys.getByLabel('devices:lease').uncheck();
    await keys.getByRole('button', { name: 'Create key' }).click();
    const token = (await page.getByTestId('new-key').textContent())!.trim();
    await page.screenshot({ path: `${SCREENS}/key-created.png`, fullPage: true });
    expect(await mcpStatus(direct1, token)).toBe(200);
    await page.goto(`${FRONT}/account`);
    // That initialize opened a session on node 1: every node's dashboard counts it as an active
    // client, by the name it gave.
    const phoneRow = phonesSection.getByRole('row', { name: /Dashboard phone/ });
    expect(await phoneRow.getByTestId('active-clients').textContent()).toBe('1');
    expect(await phoneRow.getByTestId('client-name').allTextContents()).toEqual(['status-probe 1.0']);
    await page.screenshot({ path: `${SCREENS}/dashboard.png`, fullPage: true });
    await page.getByRole('region', { name: 'API keys' }).getByRole('button', { name: 'Revoke' }).click();
    await waitFor(async () => (await mcpStatus(direct1, token)) === 401, 5_000, 'revoked key refused on node 1');

    await phone.stop();
    await waitFor(
      async () => {
        await page.reload();
        return (await phonesSection.getByRole('row', { name: /Dashboard phone/ }).textContent())!.includes('offline');
      },
      10_000,
      'phone offline on the dashboard',
    );

    // Another account (the OAuth test's) sees neither this phone nor its controls, on any node.
    const other = await browser.newContext();
    const otherPage = await other.newPage();
    await otherPage.goto(`${FRONT}/account`);
    await signIn(otherPage, `iso-${randomBytes(3).toString('hex')}@example.com`);
    await otherPage.getByRole('heading', { name: 'Your phones' }).waitFor();
    expect(await otherPage.getByText('Dashboard phone').count()).toBe(0);
    await other.close();

    await page.getByRole('region', { name: 'Phones' }).getByRole('button', { name: 'Remove' }).click();
    await page.getByText('No phone yet.').waitFor();
    await ctx.close();
  }, 90_000);

  it('the OAuth connection shows on the dashboard and Revoke ends its access token on every node', async () => {
    // A fresh grant (the first test's was revoked by the refresh-token reuse).
    const email = `conn-${randomBytes(3).toString('hex')}@example.com`;
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(`${FRONT}/account`);
    await signIn(page, email);
    const account = (await node1.relay.store.store.accountByEmail(email))!;
    const phone = await startAccountPhone(node1.relay.store.store, FRONT, account.id, 'Pixel C');
    phones.push(phone);
    const cb = await callbackServer();
    try {
      const provider = new TestOAuthProvider({
        name: 'Browser test client',
        scope: 'devices:read devices:act',
        redirectUrl: cb.url,
      });
      const transport = new StreamableHTTPClientTransport(new URL(`${FRONT}/mcp`), { authProvider: provider });
      await expect(new Client({ name: 'c', version: '1' }).connect(transport)).rejects.toBeInstanceOf(
        UnauthorizedError,
      );
      await page.goto(provider.authorizationUrl!.toString());
      await transport.finishAuth(await allow(page, cb));
      const access = provider.saved!.access_token;
      expect(await mcpStatus(direct2, access)).toBe(200);

      await page.goto(`${FRONT}/account`);
      const conns = page.getByRole('region', { name: 'OAuth connections' });
      await conns.getByText('Browser test client').waitFor();
      await page.screenshot({ path: `${SCREENS}/connections.png`, fullPage: true });
      await conns.getByRole('button', { name: 'Revoke' }).click();
      await page.getByText('No client connected via OAuth.').waitFor();
      for (const base of [direct1, direct2])
        await waitFor(async () => (await mcpStatus(base, access)) === 401, 5_000, 'oauth token revoked');
    } finally {
      cb.server.close();
      await ctx.close();
    }
  }, 90_000);

  it("isolation across nodes: account A's session, form posts and authorization never reach account B's phone", async () => {
    const store = node1.relay.store.store;
    const b = new WebClient(direct1, FRONT);
    const bEmail = `b-${randomBytes(3).toString('hex')}@example.com`;
    await b.signIn(bEmail, sink);
    const phoneB = await startAccountPhone(store, FRONT, (await store.accountByEmail(bEmail))!.id, 'Phone of B');
    phones.push(phoneB);
    const a = new WebClient(direct2, FRONT);
    const aEmail = `a-${randomBytes(3).toString('hex')}@example.com`;
    await a.signIn(aEmail, sink);

    const aPage = await a.get('/account');
    expect(aPage.html).not.toContain('Phone of B');
    const csrf = csrfOf(aPage.html);
    expect((await a.post('/account/phones/remove', { csrf, device: phoneB.deviceId })).status).toBe(303);
    expect(await store.getDevice(phoneB.deviceId)).toBeDefined();
    expect((await a.post('/account/keys', { csrf, device: phoneB.deviceId, scope: 'devices:read' })).html).toContain(
      'No such phone.',
    );
    expect(await store.listTokens({ deviceId: phoneB.deviceId })).toEqual([]);

    // An OAuth approval by A naming B's phone is refused (on node 2; B's phone is held by either node).
    const reg = (await (
      await fetch(`${direct1}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'iso', redirect_uris: ['http://127.0.0.1:9/cb'] }),
      })
    ).json()) as { client_id: string };
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: reg.client_id,
      redirect_uri: 'http://127.0.0.1:9/cb',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      resource: `${FRONT}/mcp`,
    });
    const consent = await a.get(`/account/authorize?${query.toString()}`);
    expect(consent.html).toContain('You have no phone yet');
    const fields = Object.fromEntries(query);
    const refused = await a.post('/account/authorize', {
      ...fields,
      csrf: csrfOf(consent.html),
      device: phoneB.deviceId,
      grant_scope: 'devices:read',
      decision: 'allow',
    });
    expect(refused.status).toBe(400);
    expect(refused.html).toContain('Pick one of your phones');
    expect(await store.hosted.listOAuthGrants((await store.accountByEmail(aEmail))!.id)).toEqual([]);
    // B's own session still sees its phone on the other node.
    expect((await new WebClient(direct2, FRONT).get('/account')).status).toBe(303);
    const bOnNode2 = new WebClient(direct2, FRONT);
    for (const [k, v] of b.jar) bOnNode2.jar.set(k, v);
    expect((await bOnNode2.get('/account')).html).toContain('Phone of B');
  }, 60_000);
});
