// POST /pair: a phone redeems a pairing code with its public key.
// Wrong, expired and used codes look the same (403 bad_code); the sixth failure within
// ten minutes from one address is a 429 before the code is even looked at — also when the
// attempts arrive at once, on any number of nodes.
import type { HttpRequest, HttpResponse } from '../uws.ts';
import { clientAddress, Exchange, BodyTooLarge } from './http.ts';
import { hashPairingCode, newId, normalizePairingCode } from '../crypto/secrets.ts';
import { parseDevicePublicKey } from '../crypto/device-auth.ts';
import { metrics, rateLimited } from '../metrics.ts';
import type { GatewayContext } from './context.ts';
import { markFailed, tracingOn, type Span } from '../observability/tracing.ts';
import { pairSpan } from '../observability/relay-spans.ts';

export const PAIR_FAILURE_LIMIT = 5;
export const PAIR_FAILURE_WINDOW_MS = 10 * 60_000;
const MAX_NAME = 100;

export function handlePair(ctx: GatewayContext) {
  return (res: HttpResponse, req: HttpRequest): void => {
    const ex = new Exchange(res);
    const body = ex.body(8 * 1024);
    const ip = clientAddress(res, req, ctx.config);
    const span = tracingOn ? pairSpan() : undefined;
    void pair(ctx, ex, body, ip, span)
      .catch((err) => {
        if (err instanceof BodyTooLarge) return ex.error(413, 'too_large', err.message);
        if (ex.aborted) return;
        ctx.log.error({ err: String(err) }, 'pair failed');
        ex.error(500, 'relay_error', 'pairing failed on the relay');
      })
      .finally(() => span?.end());
  };
}

async function pair(
  ctx: GatewayContext,
  ex: Exchange,
  bodyP: Promise<Buffer>,
  ip: string,
  span: Span | undefined,
): Promise<void> {
  const raw = await bodyP;
  const failKey = `pairfail:${ip}`;
  // Counted as a failure before the code is looked at, in one atomic step on the bus: of any
  // number of concurrent attempts, at most PAIR_FAILURE_LIMIT get past here on any node.
  // Whatever turns out not to be a wrong code is taken back.
  let wrongCode = false;
  try {
    if ((await ctx.bus.hit(failKey, PAIR_FAILURE_WINDOW_MS)) > PAIR_FAILURE_LIMIT) {
      metrics.pairAttempts.inc({ outcome: 'rate_limited' });
      rateLimited.pair_failures.inc();
      span?.setAttribute('phonebridge.pair.outcome', 'rate_limited');
      if (span) markFailed(span, 'rate_limited');
      return ex.error(429, 'rate_limited', 'too many failed pairing attempts from this address; try again later', {
        'Retry-After': String(PAIR_FAILURE_WINDOW_MS / 1000),
      });
    }
    wrongCode = await redeem(ctx, ex, raw, span);
  } finally {
    if (!wrongCode) await ctx.bus.unhit(failKey).catch(() => {});
  }
}

/** Answers the attempt; true when it was a wrong (or expired, or used) code. */
async function redeem(ctx: GatewayContext, ex: Exchange, raw: Buffer, span: Span | undefined): Promise<boolean> {
  let input: { code?: unknown; public_key?: unknown; name?: unknown };
  try {
    input = JSON.parse(raw.toString('utf8')) as typeof input;
    if (typeof input !== 'object' || input === null) throw new Error();
  } catch {
    ex.error(400, 'bad_request', 'body must be JSON {"code","public_key","name"}');
    return false;
  }
  if (typeof input.public_key !== 'string' || !parseDevicePublicKey(input.public_key)) {
    ex.error(400, 'bad_public_key', 'public_key must be base64 of a P-256 SubjectPublicKeyInfo (DER)');
    return false;
  }
  const name = typeof input.name === 'string' && input.name.trim() ? input.name.trim().slice(0, MAX_NAME) : 'phone';
  const code = normalizePairingCode(input.code);
  let result: Awaited<ReturnType<typeof ctx.store.redeemPairingCode>>;
  try {
    result = code
      ? await ctx.store.redeemPairingCode({
          codeHash: hashPairingCode(code),
          deviceId: newId('dev'),
          publicKey: input.public_key,
          name,
          now: new Date(),
        })
      : { ok: false, error: 'bad_code' };
  } catch (err) {
    ctx.log.warn({ err: String(err) }, 'pairing: store unavailable');
    storeUnavailable(ex);
    return false;
  }
  if (!result.ok) {
    metrics.pairAttempts.inc({ outcome: result.error });
    span?.setAttribute('phonebridge.pair.outcome', result.error);
    if (span) markFailed(span, result.error);
    if (result.error === 'bad_code') {
      ex.error(403, 'bad_code', 'the pairing code is wrong, expired or already used');
      return true;
    }
    ex.error(403, 'limit_reached', 'the account is at its plan limit for phones');
    return false;
  }
  metrics.pairAttempts.inc({ outcome: 'paired' });
  span?.setAttribute('phonebridge.pair.outcome', 'paired');
  ctx.log.info({ deviceId: result.device.id, accountId: result.device.accountId }, 'device paired');
  ex.json(200, { device_id: result.device.id, relay_host: ctx.config.relayHost });
  return false;
}

/** The database is unreachable: nothing was changed; the phone retries later. */
export function storeUnavailable(ex: Exchange): void {
  ex.error(503, 'store_unavailable', 'the relay cannot reach its database right now; try again shortly', {
    'Retry-After': '5',
  });
}
