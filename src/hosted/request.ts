// One hosted-mode request, with the uWS rules applied once (src/gateway/http.ts): the Exchange is
// made and the headers, query and body stream are taken synchronously, before any await.
import type { HttpRequest, HttpResponse } from '../uws.ts';
import {
  BodyTooLarge,
  clientAddress,
  copyHeaders,
  Exchange,
  type Headers,
  type MethodRoutes,
} from '../gateway/http.ts';
import type { GatewayContext } from '../gateway/context.ts';
import type { Account } from '../store/types.ts';
import {
  csrfMatches,
  csrfToken,
  CSRF_COOKIE,
  esc,
  hashSecret,
  layout,
  newSecret,
  PAGE_HEADERS,
  pageHeaders,
  requestCookies,
  sameOrigin,
  SESSION_COOKIE,
  setCookie,
} from './web.ts';

const FORM_LIMIT = 16 * 1024;

/**
 * Input no page or endpoint accepts: a NUL (Postgres text cannot hold one) anywhere in the query,
 * the form or a JSON body. Refused at the edge with a 400, never a 500
 * (docs/decisions/0166-input-refused-at-the-edge.md).
 */
export class BadInput extends Error {}

const hasNul = (p: URLSearchParams) => {
  for (const [k, v] of p) if (k.includes('\0') || v.includes('\0')) return true;
  return false;
};

export class HostedRequest {
  readonly cookies: Record<string, string>;
  readonly query: URLSearchParams;
  readonly ip: string;
  /** Cookies to set on whatever response goes out. */
  private readonly setCookies: string[] = [];
  private bodyP?: Promise<Buffer>;

  constructor(
    readonly ctx: GatewayContext,
    readonly ex: Exchange,
    readonly headers: Record<string, string>,
    query: string,
    ip: string,
  ) {
    this.cookies = requestCookies(headers.cookie, ctx.config.publicUrl.startsWith('https:'));
    this.query = new URLSearchParams(query);
    this.ip = ip;
  }

  get origin(): string {
    return new URL(this.ctx.config.publicUrl).origin;
  }

  get secure(): boolean {
    return this.ctx.config.publicUrl.startsWith('https:');
  }

  /**
   * Set by `handle` for POSTs (the stream must be attached synchronously). `tooLarge`: the 413
   * for a body over the limit (an OAuth endpoint answers it in its own error shape).
   */
  startBody(ex: Exchange, tooLarge?: (limit: number) => { headers: Headers; body: string }): void {
    this.bodyP = ex.body(FORM_LIMIT, tooLarge && (() => tooLarge(FORM_LIMIT)));
    this.bodyP.catch(() => {});
  }

  async form(): Promise<URLSearchParams> {
    if (!this.bodyP) return new URLSearchParams();
    const form = new URLSearchParams((await this.bodyP).toString('utf8'));
    if (hasNul(form)) throw new BadInput('a form field contains a NUL character');
    return form;
  }

  async json(): Promise<unknown> {
    const raw = this.bodyP ? (await this.bodyP).toString('utf8') : '';
    // JSON can carry a NUL only as an escape (a raw one is not valid JSON anyway).
    if (/\\u0000/i.test(raw) || raw.includes('\0')) throw new BadInput('the body contains a NUL character');
    return JSON.parse(raw);
  }

  /** The CSRF token for forms on this page; before sign-in, a fresh double-submit cookie if none. */
  csrf(): string {
    let t = csrfToken(this.cookies);
    if (!t) {
      t = newSecret();
      this.cookies[CSRF_COOKIE] = t;
      this.setCookies.push(setCookie(CSRF_COOKIE, t, { secure: this.secure }));
    }
    return t;
  }

  cookie(value: string): void {
    this.setCookies.push(value);
  }

  /** Same origin and the page's CSRF token: required of every state-changing POST. */
  async checkStateChange(): Promise<URLSearchParams | undefined> {
    const form = await this.form();
    if (!sameOrigin(this.headers, this.origin)) {
      this.page(403, 'Not allowed', '<p class="error">This request did not come from a page of this relay.</p>');
      return undefined;
    }
    if (!csrfMatches(this.cookies, form.get('csrf'))) {
      this.page(
        403,
        'Not allowed',
        '<p class="error">The form expired or was not sent by this page. Go back, reload and try again.</p>',
      );
      return undefined;
    }
    return form;
  }

  /** The signed-in account, or undefined (nothing sent). */
  async account(): Promise<Account | undefined> {
    const token = this.cookies[SESSION_COOKIE];
    if (!token || token.length > 200) return undefined;
    const s = await this.ctx.store.hosted.findWebSession(hashSecret('session', token), new Date());
    if (!s) return undefined;
    return this.ctx.store.getAccount(s.accountId);
  }

  /**
   * The answer, through the gateway's Exchange like every other route's: counted per route
   * (phonebridge_http_responses_total, phonebridge_bytes_total), with the keep-alive hint, and
   * `Connection: close` while the node drains; HEAD gets the headers without the body.
   */
  send(status: number, headers: Headers, body?: string): void {
    const ex = this.ex;
    if (ex.aborted || ex.finished) return;
    for (const c of this.setCookies) ex.appendHeader('Set-Cookie', c);
    ex.send(status, headers, body);
  }

  page(
    status: number,
    title: string,
    body: string,
    opts: { signedIn?: string; head?: string; headers?: Headers } = {},
  ): void {
    const csrf = opts.signedIn ? this.csrf() : undefined;
    this.send(status, pageHeaders(opts.headers), layout(title, body, { ...opts, csrf }));
  }

  redirect(location: string): void {
    this.send(303, { Location: location, 'Cache-Control': 'no-store' });
  }

  jsonResponse(status: number, value: unknown, headers: Headers = {}): void {
    this.send(
      status,
      { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers },
      JSON.stringify(value),
    );
  }
}

/**
 * What an OAuth endpoint answers when its handler failed, which in practice is the store or the bus
 * not answering (a database failover, a restart): its JSON error shape (RFC 6749 §5.2), not a page.
 * §5.2 names no code for the server's own trouble; `temporarily_unavailable` is RFC 6749's code for
 * exactly this (§4.1.2.1), with 503 and Retry-After as /mcp answers a store outage
 * (storeUnavailable, src/gateway/pairing.ts). No token or client was issued.
 */
const UNAVAILABLE_OAUTH_ERROR = {
  error: 'temporarily_unavailable',
  error_description: 'the relay cannot complete this request right now; try again shortly',
};
const UNAVAILABLE_HEADERS = { 'Retry-After': '5' };

/** A page handler; a synchronous throw is handled like a rejection (see handle). */
export type HostedHandler = (r: HostedRequest) => void | Promise<void>;

/** Wraps a handler: synchronous prelude, then the async part with one error policy. */
export function handle(
  ctx: GatewayContext,
  fn: HostedHandler,
  opts: {
    body?: boolean;
    /**
     * An OAuth endpoint: bad input and a body over the limit are answered as JSON in the OAuth
     * error shape with this error code (and these headers); a failure as 503
     * temporarily_unavailable (UNAVAILABLE_OAUTH_ERROR), with these headers too.
     */
    oauth?: { error: string; headers: Headers };
    /** Request headers the handler reads besides the pages' (PAGE_HEADERS). */
    headers?: readonly string[];
  } = {},
) {
  const names = opts.headers ? [...PAGE_HEADERS, ...opts.headers] : PAGE_HEADERS;
  const oauth = opts.oauth;
  // The 413 leaves from the body reader as soon as the limit is passed (Exchange.body), before the
  // handler's error policy runs, so each kind of route gives it its own shape here: the OAuth error
  // JSON, or for a page the HTML page every other answer of a page is (docs/HOSTED.md "Pages").
  const tooLarge = oauth
    ? (limit: number) => ({
        headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...oauth.headers },
        body: JSON.stringify({ error: oauth.error, error_description: `the body is larger than ${limit} bytes` }),
      })
    : (limit: number) => ({
        headers: pageHeaders(),
        body: layout(
          'Too large',
          `<p class="error" role="alert">The form was too large (more than ${limit / 1024} KiB). Go back and shorten it.</p><p><a href="/account">Back to your phones</a></p>`,
        ),
      });
  return (res: HttpResponse, req: HttpRequest): void => {
    const ex = new Exchange(res);
    const headers = copyHeaders(req, names);
    const query = req.getQuery() ?? '';
    const ip = clientAddress(res, req, ctx.config);
    const r = new HostedRequest(ctx, ex, headers, query, ip);
    if (opts.body) r.startBody(ex, tooLarge);
    new Promise<void>((resolve) => {
      if (hasNul(r.query)) throw new BadInput('a query parameter contains a NUL character');
      resolve(fn(r));
    }).catch((err) => {
      if (ex.aborted) return;
      if (err instanceof BadInput) {
        if (opts.oauth)
          return r.jsonResponse(400, { error: opts.oauth.error, error_description: err.message }, opts.oauth.headers);
        return r.page(400, 'Bad request', `<p class="error" role="alert">${esc(err.message)}.</p>`);
      }
      // The 413 (tooLarge above) has already been sent.
      if (err instanceof BodyTooLarge) return;
      ctx.log.error({ err: String(err) }, 'hosted request failed');
      if (oauth) return r.jsonResponse(503, UNAVAILABLE_OAUTH_ERROR, { ...oauth.headers, ...UNAVAILABLE_HEADERS });
      // As for OAuth: in practice the store or the bus not answering, an outage the person can
      // wait out (docs/OPERATIONS.md "Postgres unreachable"), not a fault of the page.
      r.page(
        503,
        'Try again shortly',
        `<p class="error" role="alert">${esc('The relay cannot complete this request right now. Try again in a few seconds.')}</p>`,
        { headers: UNAVAILABLE_HEADERS },
      );
    });
  };
}

/** Hosted mode's routes on the client port: HEAD wherever GET, 405 with `Allow` for the rest. */
export type HostedRoutes = MethodRoutes;
