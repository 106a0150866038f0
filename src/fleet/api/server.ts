// /api/v1 on uWS: a fleet key (Bearer or X-Api-Key, X-Api-Key wins), a per-key rate limit
// counted on the bus (so it holds across nodes), input parsed with the route's schemas, JSON
// errors with stable codes.
import type { HttpRequest, HttpResponse, TemplatedApp } from '../../uws.ts';
import { BodyTooLarge, copyHeaders, Exchange, MethodRoutes } from '../../gateway/http.ts';
import { presentedToken } from '../../gateway/auth.ts';
import type { GatewayContext } from '../../gateway/context.ts';
import { ApiError, BODY_LIMIT, jsonBody, keyRevoked, parseOr400, subscriptionRequired } from './route.ts';
import { needScope, type ApiRoute } from './routes.ts';
import type { FleetKeyLookup } from '../keys.ts';
import { openApiDocument } from './openapi.ts';
import { decodedSegment } from '../access.ts';

export interface ApiOptions {
  /** Requests per key per minute, across the cluster. */
  requestsPerMinute: number;
}

export function registerApi(
  app: TemplatedApp,
  ctx: GatewayContext,
  keys: FleetKeyLookup,
  routes: readonly ApiRoute[],
  opts: ApiOptions,
): void {
  // A GET route answers HEAD too, with the same checks and headers and no body; any other
  // method is 405 with Allow (docs/decisions/0229-head-on-the-fleet-api.md).
  const methods = new MethodRoutes(app);
  let doc: string | undefined;
  methods.get('/api/v1/openapi.json', (res) => {
    const ex = new Exchange(res);
    // Built on first use: the public URL is final only once the node listens.
    doc ??= JSON.stringify(openApiDocument(routes, `${ctx.config.publicUrl}`));
    ex.send(200, { 'Content-Type': 'application/json' }, doc);
  });
  for (const r of routes) {
    const names = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    const pattern = r.path.replace(/\{(\w+)\}/g, ':$1');
    const verb = r.method === 'delete' ? 'del' : r.method;
    methods[verb](pattern, (res: HttpResponse, req: HttpRequest) => {
      const ex = new Exchange(res);
      const h = copyHeaders(req, ['x-api-key', 'authorization']);
      const params: Record<string, string> = {};
      let badParam: string | undefined;
      names.forEach((n, i) => {
        const v = decodedSegment(req.getParameter(i) ?? '');
        if (v === undefined) badParam ??= n;
        else params[n] = v;
      });
      if (badParam !== undefined) return ex.error(400, 'bad_request', `path.${badParam}: not valid percent-encoding`);
      const query = Object.fromEntries(new URLSearchParams(req.getQuery() ?? ''));
      const body = r.body ? ex.body(BODY_LIMIT) : undefined;
      body?.catch(() => {});
      serve(ctx, keys, opts, r, ex, h, params, query, body).catch((err) => answerError(ctx, ex, err));
    });
  }
  methods.finish();
  app.any('/api/v1/*', (res) =>
    new Exchange(res).error(404, 'not_found', 'no such endpoint; see /api/v1/openapi.json'),
  );
}

async function serve(
  ctx: GatewayContext,
  keys: FleetKeyLookup,
  opts: ApiOptions,
  r: ApiRoute,
  ex: Exchange,
  h: Record<string, string>,
  rawParams: Record<string, string>,
  rawQuery: Record<string, string>,
  bodyP: Promise<Buffer> | undefined,
): Promise<void> {
  const token = presentedToken(h);
  const fk = token ? await keys.resolve(token) : undefined;
  if (!fk) {
    const device = token ? await ctx.auth.authenticate(token) : undefined;
    throw device
      ? new ApiError(
          403,
          'fleet_key_required',
          'the API takes fleet keys (phonebridge keys create --fleet); this is a device key',
        )
      : new ApiError(401, 'unauthorized', 'missing or invalid fleet key (Authorization: Bearer pbf_… or X-Api-Key)', {
          'WWW-Authenticate': 'Bearer realm="phonebridge"',
        });
  }
  if (fk.account.locked) throw subscriptionRequired();
  if (ctx.hub.isRevoked({ tokenId: fk.key.id })) throw keyRevoked();
  const used = await ctx.bus.hit(`api:k:${fk.key.id}`, 60_000);
  if (used > opts.requestsPerMinute)
    throw new ApiError(429, 'rate_limited', `more than ${opts.requestsPerMinute} requests from this key in a minute`, {
      'Retry-After': '60',
    });
  const params = r.params ? parseOr400(r.params, rawParams, 'path') : {};
  const query = r.query ? parseOr400(r.query, rawQuery, 'query') : {};
  let body: unknown = {};
  if (r.body) {
    body = parseOr400(r.body, jsonBody(await bodyP!), 'body');
  }
  if (r.scope) needScope(fk, r.scope);
  const out = await r.handle(ctx, fk, { params, query, body });
  if (out === undefined) ex.send(r.status, {}, undefined);
  else ex.json(r.status, out);
}

function answerError(ctx: GatewayContext, ex: Exchange, err: unknown): void {
  if (err instanceof ApiError) return ex.error(err.status, err.code, err.message, err.headers);
  if (err instanceof BodyTooLarge) return; // answered 413 already
  if (ex.aborted) return;
  ctx.log.error({ err: String(err) }, 'api request failed');
  ex.error(500, 'internal', 'the request failed on the relay');
}
