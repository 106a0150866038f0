// Helpers for the hosted-mode tests: phones paired into a given account, plain HTTP with a
// cookie jar (what a browser without JavaScript does), and the SMTP sink that receives sign-in mail.
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
