// Magic-link sign-in. POST /account/signin mails a link; the link's GET only renders a page with
// a "Sign in" button (mail scanners that prefetch links cannot burn the code); its POST consumes
// the code (single use, 15 minutes, stored hashed), creates the account on first sign-in and
// starts a web session (HttpOnly, SameSite=Lax cookie, Secure on https).
import { Buffer } from 'node:buffer';
import type { GatewayContext } from '../gateway/context.ts';
import { DEFAULT_PLAN, normalizeEmail } from './plans.ts';
import { newId } from '../crypto/secrets.ts';
import type { Mailer } from './mail.ts';
import { handle, type HostedRequest, type HostedRoutes } from './request.ts';
import { rateLimited } from '../metrics.ts';
import { timingSafeEqual } from 'node:crypto';
import {
  esc,
  hashSecret,
  hidden,
  newSecret,
  safeNext,
  SESSION_COOKIE,
  SESSION_TTL_MS,
  SIGNIN_BROWSER_COOKIE,
  setCookie,
} from './web.ts';

export const SIGNIN_CODE_TTL_MS = 15 * 60_000;
export const SIGNIN_WINDOW_MS = 10 * 60_000;
/**
 * Sign-in mail limits (bus counters: cluster-wide), decision 0160: an address gets 10 per window
 * and 40 per day; one address may ask 5 per window for one email; one email gets at most 30 an
 * hour over all addresses. Only a request within its address's budget counts against an email,
 * so a single address cannot lock anyone out: that takes six addresses spending all they may.
 */
export const SIGNIN_LIMIT_PER_ADDRESS = 10;
export const SIGNIN_DAY_MS = 24 * 3600_000;
export const SIGNIN_LIMIT_PER_ADDRESS_DAY = 40;
export const SIGNIN_LIMIT_PER_EMAIL = 5;
export const SIGNIN_EMAIL_WINDOW_MS = 3600_000;
export const SIGNIN_LIMIT_PER_EMAIL_ALL = 30;
/**
 * A browser keeps the bindings of the newest links it asked for, this many: asking again because
 * the first mail is slow must not cost the first link its `next`.
 */
export const SIGNIN_BROWSER_BINDINGS = 5;

export function registerSigninRoutes(app: HostedRoutes, ctx: GatewayContext, mailer: Mailer): void {
  app.get(
    '/account/signin',
    handle(ctx, (r) => signinForm(r)),
  );
  app.post(
    '/account/signin',
    handle(ctx, (r) => requestLink(r, mailer), { body: true }),
  );
  app.get(
    '/account/signin/link',
    handle(ctx, (r) => linkPage(r, r.query.get('code') ?? '')),
  );
  app.post(
    '/account/signin/link',
    handle(ctx, (r) => consumeLink(r), { body: true }),
  );
  app.post(
    '/account/signout',
    handle(ctx, (r) => signout(r), { body: true }),
  );
}

async function signinForm(r: HostedRequest, error?: string, nextRaw?: string | null): Promise<void> {
  const next = safeNext(nextRaw === undefined ? r.query.get('next') : nextRaw);
  const waiting = await waitingClient(r, next);
  r.page(
    error ? 400 : 200,
    'Sign in to phonebridge',
    `${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}${waiting}
<p>We mail you a link; no password.</p>
<form method="post" action="/account/signin">
${hidden('csrf', r.csrf())}${hidden('next', next)}
<label for="email">Email</label> <input id="email" name="email" type="email" required autocomplete="email">
<button type="submit" class="primary">Email me a sign-in link</button>
</form>`,
  );
}

async function requestLink(r: HostedRequest, mailer: Mailer): Promise<void> {
  const form = await r.checkStateChange();
  if (!form) return;
  const email = normalizeEmail(form.get('email'));
  if (!email) return signinForm(r, 'That does not look like an email address.', form.get('next'));
  if (!(await withinSigninBudget(r, email))) {
    rateLimited.signin_links.inc();
    return r.page(
      429,
      'Too many sign-in requests',
      '<p class="error">Too many sign-in links were asked for. Wait ten minutes and try again.</p>',
    );
  }
  const code = newSecret();
  // The link's next is honoured only in this browser (decision 0161): anyone can make the relay
  // mail a person a genuine link, but not plant this cookie in that person's browser. The
  // bindings of the links this browser asked for before are kept beside it.
  const bindings = withBinding(bindingsOf(r.cookies[SIGNIN_BROWSER_COOKIE]), browserBinding(code));
  r.cookie(signinBrowserCookie(r, bindings));
  await r.ctx.store.hosted.createSigninCode({
    codeHash: hashSecret('signin', code),
    email,
    nextPath: safeNext(form.get('next')),
    expiresAt: new Date(Date.now() + SIGNIN_CODE_TTL_MS),
  });
  const link = `${r.ctx.config.publicUrl}/account/signin/link?code=${code}`;
  try {
    await mailer.sendSigninLink(email, link);
  } catch (err) {
    r.ctx.log.warn({ err: String(err) }, 'sign-in mail failed');
    return r.page(503, 'Mail not sent', '<p class="error">The sign-in mail could not be sent. Try again shortly.</p>');
  }
  r.page(
    200,
    'Check your email',
    `<p>A sign-in link is on its way to <strong>${esc(email)}</strong>. It works once, for 15 minutes.</p>`,
  );
}

/**
 * The address's own budgets first; the email's counters only see requests that passed them
 * (decision 0160), so an address past its limit spends nothing of anyone else's.
 */
async function withinSigninBudget(r: HostedRequest, email: string): Promise<boolean> {
  const [window, day] = await Promise.all([
    r.ctx.bus.hit(`signin:ip:${r.ip}`, SIGNIN_WINDOW_MS),
    r.ctx.bus.hit(`signin:ipday:${r.ip}`, SIGNIN_DAY_MS),
  ]);
  if (window > SIGNIN_LIMIT_PER_ADDRESS || day > SIGNIN_LIMIT_PER_ADDRESS_DAY) return false;
  const who = hashSecret('email', email);
  const pair = await r.ctx.bus.hit(`signin:pair:${who}:${r.ip}`, SIGNIN_WINDOW_MS);
  if (pair > SIGNIN_LIMIT_PER_EMAIL) return false;
  return (await r.ctx.bus.hit(`signin:email:${who}`, SIGNIN_EMAIL_WINDOW_MS)) <= SIGNIN_LIMIT_PER_EMAIL_ALL;
}

/** A cookie value tied to one sign-in code, useless without it (it is a hash of it). */
const browserBinding = (code: string) => hashSecret('signin-browser', code);

const BINDING_SEPARATOR = '.';
const WELL_FORMED_BINDING = /^[0-9a-f]{64}$/;

/** The bindings a `pb_signin` cookie holds: the well-formed ones, at most the newest few. */
export function bindingsOf(cookie: string | undefined): string[] {
  if (!cookie) return [];
  return cookie
    .split(BINDING_SEPARATOR)
    .filter((b) => WELL_FORMED_BINDING.test(b))
    .slice(-SIGNIN_BROWSER_BINDINGS);
}

/** The bindings once this browser asked for one more link: it is the newest, the oldest past the bound go. */
export function withBinding(bindings: readonly string[], added: string): string[] {
  return [...bindings.filter((b) => b !== added), added].slice(-SIGNIN_BROWSER_BINDINGS);
}

/** Whether the bindings hold this one (each compared in constant time, all of them compared). */
export function holdsBinding(bindings: readonly string[], wanted: string): boolean {
  return bindings.reduce((found, b) => sameString(b, wanted) || found, false);
}

/** The `pb_signin` cookie holding these bindings; none left: the cookie is removed. */
function signinBrowserCookie(r: HostedRequest, bindings: readonly string[]): string {
  const maxAgeS = bindings.length ? SIGNIN_CODE_TTL_MS / 1000 : 0;
  return setCookie(SIGNIN_BROWSER_COOKIE, bindings.join(BINDING_SEPARATOR), { secure: r.secure, maxAgeS });
}

function sameString(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Signed out with a consent waiting: say which client waits, and where its access would go. */
async function waitingClient(r: HostedRequest, next: string): Promise<string> {
  if (!next.startsWith('/account/authorize?')) return '';
  const q = new URLSearchParams(next.slice('/account/authorize?'.length));
  const id = q.get('client_id') ?? '';
  const client = id && !id.includes('\0') ? await r.ctx.store.hosted.getOAuthClient(id) : undefined;
  if (!client) return '';
  let host = '';
  try {
    host = new URL(q.get('redirect_uri') ?? '').host;
  } catch {
    // shown without a host
  }
  return `<p role="status" data-testid="consent-waiting">A client, <strong>${esc(client.name)}</strong>${host ? ` (access would go to <strong>${esc(host)}</strong>)` : ''}, is waiting for your consent. Sign in to decide.</p>`;
}

/**
 * The link's page names the account it signs into; signed in as another account, it asks before
 * replacing it (decision 0167). Nothing is consumed here: a GET is what link scanners do.
 */
async function linkPage(r: HostedRequest, code: string, status = 200): Promise<void> {
  const target =
    code && code.length <= 100
      ? await r.ctx.store.hosted.peekSigninCode(hashSecret('signin', code), new Date())
      : undefined;
  if (!target) return expiredLink(r);
  const current = await r.account();
  const other = current && current.email !== target.email ? current : undefined;
  r.page(
    status,
    'Sign in',
    `<p>This link signs you in as <strong data-testid="link-account">${esc(target.email)}</strong>.</p>
${other ? `<p class="error" role="alert" data-testid="account-switch">This browser is signed in as <strong>${esc(other.email ?? other.id)}</strong>. Signing in replaces that account here: phones you pair next will belong to ${esc(target.email)}. If someone sent you this link, do not use it.</p>` : ''}
<form method="post" action="/account/signin/link">
${hidden('csrf', r.csrf())}${hidden('code', code)}${other ? hidden('switch', 'yes') : ''}
<button type="submit" class="primary">${other ? `Sign out and sign in as ${esc(target.email)}` : 'Sign in'}</button>
</form>`,
  );
}

function expiredLink(r: HostedRequest): void {
  r.page(
    400,
    'Link expired',
    '<p class="error">This sign-in link was already used or has expired.</p><p><a href="/account/signin">Ask for a new one</a></p>',
  );
}

async function consumeLink(r: HostedRequest): Promise<void> {
  const form = await r.checkStateChange();
  if (!form) return;
  const code = form.get('code') ?? '';
  if (!code || code.length > 100) return expiredLink(r);
  if (form.get('switch') !== 'yes') {
    // Signed in as another account and not asked yet: ask (the page names both).
    const [current, target] = await Promise.all([
      r.account(),
      r.ctx.store.hosted.peekSigninCode(hashSecret('signin', code), new Date()),
    ]);
    if (current && target && current.email !== target.email) return linkPage(r, code, 409);
  }
  const used = await r.ctx.store.hosted.consumeSigninCode(hashSecret('signin', code), new Date());
  if (!used) return expiredLink(r);
  // The account this browser leaves, if any: its session ends here.
  const previous = r.cookies[SESSION_COOKIE];
  if (previous && previous.length <= 200) await r.ctx.store.hosted.deleteWebSession(hashSecret('session', previous));
  let account = await r.ctx.store.accountByEmail(used.email);
  if (!account) {
    const created = await r.ctx.store.createAccount({ id: newId('acct'), email: used.email, ...DEFAULT_PLAN });
    // A concurrent first sign-in of the same address made it first: use that one.
    account = created.ok ? created.account : await r.ctx.store.accountByEmail(used.email);
    if (!account) throw new Error('account vanished during sign-in');
    r.ctx.log.info({ accountId: account.id }, 'account created');
  }
  const token = newSecret();
  await r.ctx.store.hosted.createWebSession({
    tokenHash: hashSecret('session', token),
    accountId: account.id,
    expiresAt: new Date(Date.now() + SESSION_TTL_MS),
  });
  r.cookie(setCookie(SESSION_COOKIE, token, { secure: r.secure, maxAgeS: SESSION_TTL_MS / 1000 }));
  // Any link this browser asked for (and only those) goes on to its next; its binding is spent.
  const bindings = bindingsOf(r.cookies[SIGNIN_BROWSER_COOKIE]);
  const binding = browserBinding(code);
  const sameBrowser = holdsBinding(bindings, binding);
  const unspent = bindings.filter((b) => b !== binding);
  if (sameBrowser) r.cookie(signinBrowserCookie(r, unspent));
  r.redirect(sameBrowser ? safeNext(used.nextPath) : '/account');
}

async function signout(r: HostedRequest): Promise<void> {
  const form = await r.checkStateChange();
  if (!form) return;
  const token = r.cookies[SESSION_COOKIE];
  if (token) await r.ctx.store.hosted.deleteWebSession(hashSecret('session', token));
  r.cookie(setCookie(SESSION_COOKIE, '', { secure: r.secure, maxAgeS: 0 }));
  r.redirect('/account/signin');
}
