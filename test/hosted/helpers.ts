// Helpers for the hosted-mode tests: phones paired into a given account, plain HTTP with a
// cookie jar (what a browser without JavaScript does), the SMTP sink that receives sign-in mail,
// and the OAuth steps (register, consent and Allow, token, an SDK client provider).
import { createHash, randomBytes } from 'node:crypto';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { createPairing } from '../../src/provisioning.ts';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import type { Store } from '../../src/store/types.ts';
import { createPhoneServer } from '../../src/device/tools/index.ts';
import { SimPhone } from '../../src/device/sim/model.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { tempDir } from '../helpers/relay.ts';

export interface HostedPhone {
  agent: DeviceAgent;
  deviceId: string;
  stop(): Promise<void>;
}

/** Pairs a phone from a pairing payload and waits for its socket. */
export async function startPhoneWithQr(
  qr: { v: 1; relay: string; code: string },
  name = 'test-phone',
  /** The phone's MCP server; the echo server unless a test needs the real tool surface. */
  server: 'echo' | 'tools' = 'echo',
): Promise<HostedPhone> {
  const stateDir = tempDir('pb-hphone-');
  const identity = await DeviceAgent.pair({ stateDir, qr, name, log: silentLogger });
  const sim = new SimPhone({ seed: 7 });
  const agent = new DeviceAgent({
    stateDir,
    createServer: () =>
      server === 'echo' ? createEchoServer() : createPhoneServer({ phone: sim, deviceId: identity.device_id }),
    log: silentLogger,
    backoff: { baseMs: 50, capMs: 500 },
  });
  const connected = new Promise<void>((resolve) => agent.once('connected', () => resolve()));
  agent.start();
  await connected;
  return { agent, deviceId: identity.device_id, stop: () => agent.stop() };
}

/** A phone paired into `accountId` through the store (as the dashboard or `pair --account` does). */
export async function startAccountPhone(
  store: Store,
  relay: string,
  accountId: string,
  name?: string,
  server: 'echo' | 'tools' = 'echo',
) {
  const qr = await createPairing(store, { accountId, relay });
  return startPhoneWithQr(qr, name, server);
}

/** A real SMTP server on an ephemeral loopback port that keeps every message it receives. */
export interface SmtpSink {
  url: string;
  messages: { to: string[]; raw: string }[];
  /** Resolves with the sign-in link of the next (or an already received, unread) mail to `to`. */
  nextLink(to: string, timeoutMs?: number): Promise<string>;
  close(): Promise<void>;
}

export async function startSmtpSink(): Promise<SmtpSink> {
  const { SMTPServer } = await import('smtp-server');
  const messages: { to: string[]; raw: string }[] = [];
  const read = new Set<number>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        messages.push({
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as { port: number }).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    async nextLink(to, timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      while (Date.now() < until) {
        const i = messages.findIndex((m, idx) => !read.has(idx) && m.to.includes(to.toLowerCase()));
        if (i >= 0) {
          read.add(i);
          // Quoted-printable may wrap long lines with "=\r\n".
          const body = messages[i].raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=');
          const m = /(https?:\/\/\S+\/account\/signin\/link\?code=[A-Za-z0-9_-]+)/.exec(body);
          if (m) return m[1];
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no sign-in mail to ${to}`);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A cookie-keeping HTTP client that behaves like a browser without JavaScript (no redirects followed). */
export class WebClient {
  readonly jar = new Map<string, string>();
  constructor(
    readonly base: string,
    /** What Origin a browser would send on this relay's pages. */
    readonly origin = new URL(base).origin,
    readonly forwardedFor?: string,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.jar.size) h.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (this.forwardedFor) h['x-forwarded-for'] = this.forwardedFor;
    return h;
  }

  private keep(res: Response): void {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      const k = pair.slice(0, i);
      const v = pair.slice(i + 1);
      if (v === '' || /Max-Age=0/.test(c)) this.jar.delete(k);
      else this.jar.set(k, v);
    }
  }

  async get(path: string): Promise<{ status: number; html: string; location: string | null; res: Response }> {
    const res = await fetch(new URL(path, this.base), { headers: this.headers(), redirect: 'manual' });
    this.keep(res);
    return { status: res.status, html: await res.text(), location: res.headers.get('location'), res };
  }

  async post(
    path: string,
    form: Record<string, string | string[]>,
    opts: { origin?: string | null } = {},
  ): Promise<{ status: number; html: string; location: string | null; res: Response }> {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(form)) for (const x of Array.isArray(v) ? v : [v]) body.append(k, x);
    const origin = opts.origin === undefined ? this.origin : opts.origin;
    const res = await fetch(new URL(path, this.base), {
      method: 'POST',
      headers: this.headers({
        'content-type': 'application/x-www-form-urlencoded',
        ...(origin ? { origin } : {}),
      }),
      body: body.toString(),
      redirect: 'manual',
    });
    this.keep(res);
    return { status: res.status, html: await res.text(), location: res.headers.get('location'), res };
  }

  /** Signs in by magic link: asks for the mail, opens the link, presses "Sign in". */
  async signIn(email: string, sink: SmtpSink, next?: string): Promise<void> {
    const form = await this.get(`/account/signin${next ? `?next=${encodeURIComponent(next)}` : ''}`);
    const asked = await this.post('/account/signin', {
      csrf: csrfOf(form.html),
      email,
      next: next ?? '/account',
    });
    if (asked.status !== 200) throw new Error(`sign-in request: ${asked.status} ${asked.html}`);
    const link = new URL(await sink.nextLink(email));
    const page = await this.get(link.pathname + link.search);
    const done = await this.post('/account/signin/link', {
      csrf: csrfOf(page.html),
      code: link.searchParams.get('code')!,
    });
    if (done.status !== 303) throw new Error(`sign-in: ${done.status} ${done.html}`);
  }
}

export function csrfOf(html: string): string {
  const m = /name="csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('no CSRF token on the page');
  return m[1];
}

/** Hidden inputs and their values, the way a browser would submit a form. */
export function formFields(html: string, action: string): Record<string, string> {
  const start = html.indexOf(`action="${action}"`);
  if (start < 0) throw new Error(`no form posting to ${action}`);
  const end = html.indexOf('</form>', start);
  const out: Record<string, string> = {};
  for (const m of html.slice(start, end).matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g))
    out[m[1]] = m[2]
      .replace(/&amp;/g, '&')
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>');
  return out;
}

// --- OAuth steps the hosted tests share -----------------------------------------------------

/** The loopback redirect URI the tests' clients register (nothing listens: the code is read off the hop page). */
export const CALLBACK = 'http://127.0.0.1:4567/callback';

/** A PKCE verifier and its S256 challenge. */
export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Dynamic registration (RFC 7591) from a given client address. */
export async function registerClient(
  base: string,
  forwardedFor: string,
  opts: { redirectUris?: string[]; name?: string } = {},
): Promise<{ status: number; body: { client_id: string } & Record<string, unknown> }> {
  const r = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
    body: JSON.stringify({
      client_name: opts.name ?? 'Test client',
      redirect_uris: opts.redirectUris ?? [CALLBACK],
      token_endpoint_auth_method: 'none',
    }),
  });
  return { status: r.status, body: (await r.json()) as { client_id: string } & Record<string, unknown> };
}

/** An authorization request's parameters for this relay's /mcp; `extra` overrides any of them. */
export function authorizeParams(
  base: string,
  clientId: string,
  challenge: string,
  extra: Record<string, string> = {},
): URLSearchParams {
  return new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: CALLBACK,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    scope: 'devices:read devices:act',
    state: 'st-1',
    resource: `${base}/mcp`,
    ...extra,
  });
}

/** The URL the hop page's meta refresh sends the browser to. */
export function hopTarget(html: string): URL {
  const m = /http-equiv="refresh" content="0;url=([^"]+)"/.exec(html);
  if (!m) throw new Error(`not a hop page: ${html.slice(0, 300)}`);
  return new URL(m[1].replace(/&amp;/g, '&'));
}

/**
 * The consent page of an authorization request (its query, or the whole authorize URL an SDK
 * client produced), then Allow with one phone and `scopes`: the answer page (a hop with the code,
 * or a refusal).
 */
export async function allowPage(
  web: WebClient,
  request: URLSearchParams | URL,
  deviceId: string,
  scopes: string[] = ['devices:read', 'devices:act'],
) {
  const path = request instanceof URL ? request.pathname + request.search : `/account/authorize?${request.toString()}`;
  const page = await web.get(path);
  if (page.status !== 200) throw new Error(`consent page: ${page.status} ${page.html.slice(0, 300)}`);
  return web.post('/account/authorize', {
    ...formFields(page.html, '/account/authorize'),
    device: deviceId,
    grant_scope: scopes,
    decision: 'allow',
  });
}

/** A token endpoint request (form-encoded). */
/** An initialize on `base`/mcp with a bearer token: what a client does first with a fresh access token. */
export function bearerInitialize(base: string, token: string): Promise<Response> {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } }),
  });
}

export async function tokenRequest(base: string, params: Record<string, string>) {
  const r = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params).toString(),
  });
  return { status: r.status, body: await r.json(), type: r.headers.get('content-type') };
}

/**
 * An OAuth client provider for the official SDK client that keeps what it is given. With
 * `clientMetadataUrl` it identifies itself by that metadata document instead of registering.
 */
export class TestOAuthProvider implements OAuthClientProvider {
  info?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier?: string;
  authorizationUrl?: URL;
  readonly redirectUrl: string;
  readonly clientMetadataUrl?: string;
  constructor(
    private readonly opts: { name: string; scope?: string; redirectUrl?: string; clientMetadataUrl?: string },
  ) {
    this.redirectUrl = opts.redirectUrl ?? CALLBACK;
    this.clientMetadataUrl = opts.clientMetadataUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.opts.name,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...(this.opts.scope ? { scope: this.opts.scope } : {}),
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(t: OAuthTokens) {
    this.saved = t;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier!;
  }
}
