// Client ID Metadata Documents end to end: a real HTTPS host at a public address (a network
// namespace, test/hosted/public-host.ts), the relay fetching through its guard, and the official
// SDK's OAuth client using the document's URL as its client_id — authorize, consent, token, and a
// tools/list on a real phone. Then the guard at the edge: refused addresses (also when only a
// later DNS answer would be one), redirects, size, time, a mismatched document, an unknown CA.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { type TestRelay } from '../helpers/relay.ts';
import { clientAddress, signedInWithPhone as signedIn, startHostedRelay, type HostedRelay } from './hosted-relay.ts';
import { ClientMetadataFetcher, type ResolvedAddress } from '../../src/hosted/client-metadata.ts';
import { FETCH_TIMEOUT_MS } from '../../src/hosted/client-metadata-rules.ts';
import { CALLBACK, formFields, hopTarget, TestOAuthProvider, WebClient } from './helpers.ts';
import { startPublicHost, type PublicHost } from './public-host.ts';

const NAME = 'client.cimd-test.example';
const doc = (url: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    client_id: url,
    client_name: 'Metadata Client',
    redirect_uris: [CALLBACK],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    ...extra,
  });

let host: PublicHost;
let h: HostedRelay;
let relay: TestRelay;

/** Every name the relay's resolver was asked for. */
const lookups: string[] = [];
/** What the injected resolver answers: the test host's public address unless a test says otherwise. */
const answers = new Map<string, ResolvedAddress[]>();
const resolve = (h: string): Promise<ResolvedAddress[]> => {
  lookups.push(h);
  return Promise.resolve(answers.get(h) ?? [{ address: host.address, family: 4 }]);
};

beforeAll(async () => {
  host = await startPublicHost(NAME, (origin) => ({
    '/client.json': {
      headers: { 'content-type': 'application/json', 'cache-control': 'max-age=600' },
      body: doc(`${origin}/client.json`),
    },
    '/other.json': { body: doc(`${origin}/other.json`, { client_name: 'Other' }) },
    '/moved.json': { status: 302, headers: { location: `${origin}/moved-target.json` } },
    '/moved-target.json': { body: doc(`${origin}/moved.json`) },
    '/big.json': { body: doc(`${origin}/big.json`, { padding: 'x'.repeat(6 * 1024) }) },
    '/mismatch.json': { body: doc(`${origin}/client.json`) },
    '/hang.json': { hang: true },
    '/pinned.json': { body: doc(`${origin}/pinned.json`) },
    '/noname.json': { body: doc(`${origin}/noname.json`, { client_name: undefined }) },
  }));
  h = await startHostedRelay({
    args: ['--trust-proxy', '--control-poll-ms', '50'],
    relayOptions: { hosted: { clientMetadata: { resolve, extraCa: host.caPem } } },
  });
  ({ relay } = h);
}, 60_000);

afterAll(async () => {
  await h?.stop();
  await host?.close();
});

const addr = clientAddress;
const signedInWithPhone = () => signedIn(h, { name: 'Pixel', server: 'tools' });

describe('a client identified by its metadata document', () => {
  it('the SDK client with clientMetadataUrl: authorize → consent → token → tools/list, the document fetched once', async () => {
    const meta = await (await fetch(`${relay.url}/.well-known/oauth-authorization-server`)).json();
    expect(meta.client_id_metadata_document_supported).toBe(true);

    const { web, account, phone } = await signedInWithPhone();
    const url = `https://${NAME}/client.json`;
    const provider = new TestOAuthProvider({ name: 'Metadata Client', clientMetadataUrl: url });
    const first = new Client({ name: 'metadata-client', version: '1.0.0' });
    await expect(
      first.connect(new StreamableHTTPClientTransport(new URL(`${relay.url}/mcp`), { authProvider: provider })),
    ).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.info?.client_id).toBe(url); // no registration: the URL is the client id
    expect(provider.authorizationUrl!.searchParams.get('client_id')).toBe(url);

    const fetchesBefore = host.requests.filter((p) => p === '/client.json').length;
    const lookupsBefore = lookups.length;
    const consent = await web.get(provider.authorizationUrl!.pathname + provider.authorizationUrl!.search);
    expect(consent.status).toBe(200);
    expect(consent.html).toContain('Metadata Client');
    expect(consent.html).toMatch(new RegExp(`data-testid="client-trust">metadata from ${NAME.replace(/\./g, '\\.')}<`));
    expect(consent.html).not.toMatch(/>unverified</);
    expect(consent.html).toMatch(
      /data-testid="client-document"[^>]*>[^<]*<code>https:\/\/client\.cimd-test\.example\/client\.json<\/code>/,
    );
    expect(consent.html).toMatch(/Any program on this computer can present this client id/);
    expect(consent.html).toMatch(/data-testid="redirect-host">127\.0\.0\.1:4567</);
    // One resolution, one fetch; the Allow below is answered from the cache (max-age=600).
    expect(lookups.slice(lookupsBefore)).toEqual([NAME]);
    const r = await web.post('/account/authorize', {
      ...formFields(consent.html, '/account/authorize'),
      device: phone.deviceId,
      grant_scope: ['devices:read', 'devices:act'],
      decision: 'allow',
    });
    expect(host.requests.filter((p) => p === '/client.json').length).toBe(fetchesBefore + 1);
    const code = hopTarget(r.html).searchParams.get('code')!;
    expect(code).toBeTruthy();
    await new StreamableHTTPClientTransport(new URL(`${relay.url}/mcp`), { authProvider: provider }).finishAuth(code);
    expect(provider.saved?.access_token).toMatch(/^pb_/);

    const client = new Client({ name: 'metadata-client', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${relay.url}/mcp`), { authProvider: provider }));
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain('tap');
    expect(tools.tools.map((t) => t.name)).not.toContain('take_device'); // devices:lease was not granted
    await client.close();

    // The connection shows on the dashboard under the URL, and refreshing works with the URL as client_id.
    const grants = await relay.relay.store.store.hosted.listOAuthGrants(account.id);
    expect(grants.map((g) => [g.clientId, g.clientName])).toEqual([[url, 'Metadata Client']]);
    const refreshed = await fetch(`${relay.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: provider.saved!.refresh_token!,
        client_id: url,
      }),
    });
    expect(refreshed.status).toBe(200);
  }, 60_000);

  it('a redirect URI the document does not list is an error page, and an unfetched URL is unknown at the token endpoint', async () => {
    const { web } = await signedInWithPhone();
    const url = `https://${NAME}/other.json`;
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: url,
      redirect_uri: 'http://127.0.0.1:9999/elsewhere',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      state: 's',
      resource: `${relay.url}/mcp`,
    });
    const page = await web.get(`/account/authorize?${q.toString()}`);
    expect(page.status).toBe(400);
    expect(page.html).toContain('redirect_uri is not registered');
    expect(page.html).not.toContain('http-equiv="refresh"');

    const token = await fetch(`${relay.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: 'x',
        client_id: `https://${NAME}/never.json`,
      }),
    });
    // RFC 6749 §5.2: 400 (a 401 is for a client that tried the Authorization header).
    expect(token.status).toBe(400);
    expect(await token.json()).toMatchObject({ error: 'invalid_client' });
  });

  it('a document the relay refuses is an error page naming why, never a redirect', async () => {
    const web = new WebClient(relay.url, undefined, addr());
    const page = async (clientId: string) => {
      const q = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: CALLBACK,
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
        resource: `${relay.url}/mcp`,
      });
      return web.get(`/account/authorize?${q.toString()}`);
    };
    answers.set('inside.cimd-test.example', [{ address: '10.0.0.7', family: 4 }]);
    const inside = await page('https://inside.cimd-test.example/client.json');
    expect(inside.status).toBe(400);
    expect(inside.html).toMatch(/does not resolve to public addresses only/);
    // The same words as for a name with no address at all: no oracle for internal names.
    answers.set('nowhere.cimd-test.example', []);
    expect((await page('https://nowhere.cimd-test.example/client.json')).html).toMatch(
      /does not resolve to public addresses only/,
    );
    const moved = await page(`https://${NAME}/moved.json`);
    expect(moved.html).toMatch(/302: redirects are not followed/);
    expect((await page(`https://${NAME}/mismatch.json`)).html).toMatch(/client_id is not the URL/);
    expect((await page('http://client.cimd-test.example/client.json')).html).toMatch(/unknown client_id/);
    expect((await page(`https://${NAME}/client.json?x=1`)).html).toMatch(/must not have a query/);
  });
});

describe('the fetch guard at the edge', () => {
  const fetcher = (opts: { resolve?: (h: string) => Promise<ResolvedAddress[]>; ca?: boolean } = {}) =>
    new ClientMetadataFetcher({
      resolve: opts.resolve ?? resolve,
      extraCa: opts.ca === false ? undefined : host.caPem,
    });

  it('refuses a name when any of its addresses is not public, and connects only to the address it checked', async () => {
    const f = fetcher();
    for (const bad of ['127.0.0.1', '169.254.169.254', '100.64.1.1', '::1', 'fd00::1', '::ffff:10.0.0.1']) {
      const name = `${randomBytes(3).toString('hex')}.cimd-test.example`;
      answers.set(name, [
        { address: host.address, family: 4 },
        { address: bad, family: bad.includes(':') ? 6 : 4 },
      ]);
      const r = await f.get(`https://${name}/client.json`);
      expect(r.ok, bad).toBe(false);
      expect(r.ok ? '' : `${r.reason} / ${r.detail}`).toMatch(/not resolve to public addresses only \/ .* is refused/);
    }
    // A resolver that answers the public address first and a loopback one afterwards (DNS
    // rebinding): asked once, and the socket goes to the first, checked answer.
    let calls = 0;
    const rebinding = () => {
      calls++;
      return Promise.resolve([{ address: calls === 1 ? host.address : '127.0.0.1', family: 4 }]);
    };
    const pinned = await fetcher({ resolve: rebinding }).get(`https://${NAME}/pinned.json`);
    expect(pinned).toMatchObject({ ok: true, client: { clientName: 'Metadata Client' } });
    expect(calls).toBe(1);
    f.close();
  });

  it('follows no redirect, stops at 5 KiB and at the time limit, caches nothing it refused', async () => {
    const f = fetcher();
    expect(await f.get(`https://${NAME}/moved.json`)).toMatchObject({
      ok: false,
      reason: /redirects are not followed/,
    });
    expect(await f.get(`https://${NAME}/big.json`)).toMatchObject({ ok: false, reason: /larger than 5120 bytes/ });
    expect(await f.get(`https://${NAME}/noname.json`)).toMatchObject({ ok: false, reason: /client_name/ });
    expect(await f.get(`https://${NAME}/noname.json`)).toMatchObject({ ok: false });
    const started = Date.now();
    expect(await f.get(`https://${NAME}/hang.json`)).toMatchObject({ ok: false, reason: /no answer within 5000 ms/ });
    expect(Date.now() - started).toBeGreaterThanOrEqual(FETCH_TIMEOUT_MS - 50);
    // The host logs a request as it arrives; seconds later every line above has been read.
    expect(host.requests).toContain('/moved.json');
    expect(host.requests).not.toContain('/moved-target.json'); // the redirect was not followed
    expect(host.requests.filter((p) => p === '/noname.json')).toHaveLength(2); // a refused document is not cached
    f.close();
  }, 30_000);

  it('verifies the certificate: without the test CA the fetch fails', async () => {
    const r = await fetcher({ ca: false }).get(`https://${NAME}/client.json`);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.reason).toMatch(/certificate/);
  });
});
