// POST /pair: a phone redeems a pairing code with its public key.
// Wrong, expired and used codes look the same (403 bad_code), but for the phone that used a
// code asking again with the same key, which gets its device again (a lost 200 is safe to
// retry: docs/decisions/0238-a-pairing-repeated-by-its-phone.md); the sixth failure within
// ten minutes from one address is a 429 before the code is even looked at — also when the
// attempts arrive at once, on any number of nodes. Good pairings in flight are not failures:
// attempts beyond them wait for a slot rather than being refused.
import type { HttpRequest, HttpResponse } from '../uws.ts';
import { clientAddress, Exchange, BodyTooLarge } from './http.ts';
import { hashPairingCode, newId, normalizePairingCode } from '../crypto/secrets.ts';
import { canonicalDevicePublicKey } from '../crypto/device-auth.ts';
import { deviceName } from '../provisioning.ts';
import { metrics, rateLimited } from '../metrics.ts';
import type { GatewayContext } from './context.ts';
import { markFailed, tracingOn, type Span } from '../observability/tracing.ts';
import { pairSpan } from '../observability/relay-spans.ts';

export const PAIR_FAILURE_LIMIT = 5;
export const PAIR_FAILURE_WINDOW_MS = 10 * 60_000;

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
  const badKey = `pairbad:${ip}`;
  // Counted as a failure before the code is looked at, in one atomic step on the bus: of any
  // number of concurrent attempts, at most PAIR_FAILURE_LIMIT get past here on any node.
  // Whatever turns out not to be a wrong code is taken back. An attempt that finds the gate
  // full while fewer than PAIR_FAILURE_LIMIT failures are confirmed waits for a slot instead
  // of failing: the attempts ahead of it may be good pairings (a rack enrolling many phones
  // behind one address, docs/decisions/0173-enrollment.md), which give their slot back.
  let wrongCode = false;
  const deadline = Date.now() + PAIR_GATE_WAIT_MS;
  const refuse = () => {
    metrics.pairAttempts.inc({ outcome: 'rate_limited' });
    rateLimited.pair_failures.inc();
    span?.setAttribute('phonebridge.pair.outcome', 'rate_limited');
    if (span) markFailed(span, 'rate_limited');
    ex.error(429, 'rate_limited', 'too many failed pairing attempts from this address; try again later', {
      'Retry-After': String(PAIR_FAILURE_WINDOW_MS / 1000),
    });
  };
  for (;;) {
    // Five confirmed wrong codes refuse at once, also when the gate's counter is below the
    // limit: its window opened at the address's first attempt (perhaps a good pairing) and
    // can lapse while theirs, opened at the first wrong code, still runs.
    if ((await ctx.bus.peek(badKey)) >= PAIR_FAILURE_LIMIT) return refuse();
    if ((await ctx.bus.hit(failKey, PAIR_FAILURE_WINDOW_MS)) <= PAIR_FAILURE_LIMIT) break;
    await ctx.bus.unhit(failKey).catch(() => {});
    // Wait until a slot looks free (a read, not a reservation: waiting attempts cost one
    // counter read per poll), then try to take it again.
    for (;;) {
      if ((await ctx.bus.peek(badKey)) >= PAIR_FAILURE_LIMIT || Date.now() >= deadline || ex.aborted) return refuse();
      await slotFreed(failKey);
      if ((await ctx.bus.peek(failKey)) < PAIR_FAILURE_LIMIT) break;
    }
  }
  try {
    wrongCode = await redeem(ctx, ex, raw, span);
  } finally {
    if (!wrongCode) await ctx.bus.unhit(failKey).catch(() => {});
    else await ctx.bus.hit(badKey, PAIR_FAILURE_WINDOW_MS).catch(() => {});
    wake(failKey);
  }
}

// Attempts waiting at the gate on this node are woken when one here resolves; those whose
// slots free up on another node find out by polling.
const gateWaiters = new Map<string, Set<() => void>>();

function slotFreed(key: string): Promise<void> {
  return new Promise((resolve) => {
    let set = gateWaiters.get(key);
    if (!set) gateWaiters.set(key, (set = new Set()));
    const done = () => {
      clearTimeout(timer);
      set.delete(done);
      if (set.size === 0 && gateWaiters.get(key) === set) gateWaiters.delete(key);
      resolve();
    };
    const timer = setTimeout(done, PAIR_GATE_POLL_MS + Math.random() * PAIR_GATE_POLL_MS);
    set.add(done);
  });
}

/** One waiter per freed slot (the others keep waiting, or poll). */
function wake(key: string): void {
  const first = gateWaiters.get(key)?.values().next().value;
  first?.();
}

/** How long an attempt waits for a slot at the gate while the attempts ahead are unresolved. */
const PAIR_GATE_WAIT_MS = 60_000;
const PAIR_GATE_POLL_MS = 100;

/** Answers the attempt; true when it was a wrong (or expired, or used) code. */
async function redeem(ctx: GatewayContext, ex: Exchange, raw: Buffer, span: Span | undefined): Promise<boolean> {
  let input: { code?: unknown; public_key?: unknown; name?: unknown };
  try {
    input = JSON.parse(raw.toString('utf8')) as typeof input;
    // A body without a string code is a malformed request, not a guess: it is not counted.
    if (typeof input !== 'object' || input === null || Array.isArray(input) || typeof input.code !== 'string')
      throw new Error();
  } catch {
    ex.error(400, 'bad_request', 'body must be JSON {"code","public_key","name"}');
    return false;
  }
  const publicKey = typeof input.public_key === 'string' ? canonicalDevicePublicKey(input.public_key) : undefined;
  if (!publicKey) {
    ex.error(400, 'bad_public_key', 'public_key must be base64 of a P-256 SubjectPublicKeyInfo (DER)');
    return false;
  }
  const name = (typeof input.name === 'string' && deviceName(input.name)) || 'phone';
  const code = normalizePairingCode(input.code);
  let result: Awaited<ReturnType<typeof ctx.store.redeemPairingCode>>;
  try {
    result = code
      ? await ctx.store.redeemPairingCode({
          codeHash: hashPairingCode(code),
          deviceId: newId('dev'),
          publicKey,
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
  const outcome = result.repeated ? 'repeated' : 'paired';
  metrics.pairAttempts.inc({ outcome });
  span?.setAttribute('phonebridge.pair.outcome', outcome);
  ctx.log.info(
    { deviceId: result.device.id, accountId: result.device.accountId },
    result.repeated ? 'device pairing repeated (same code and key)' : 'device paired',
  );
  ex.json(200, { device_id: result.device.id, relay_host: ctx.config.relayHost });
  return false;
}

/** The database is unreachable: nothing was changed; the phone retries later. */
export function storeUnavailable(ex: Exchange): void {
  ex.error(503, 'store_unavailable', 'the relay cannot reach its database right now; try again shortly', {
    'Retry-After': '5',
  });
}
