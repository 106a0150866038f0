// Pairing: redeem the QR's one-time code for a device id, once per state dir; a lost answer or a
// relay briefly down is asked again with the same code and key.
import { rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { PinMismatchError, postJson, relayUrl, type FetchLike } from './relay-http.ts';
import { ensureStateDir, KEY_FILE, loadIdentity, loadOrCreateKey, saveIdentity, type DeviceIdentity } from './state.ts';

const QrPayloadSchema = z.object({
  v: z.literal(1),
  relay: z.string().regex(/^https?:\/\/[^/\s]+/, 'relay must be an http(s) URL'),
  code: z.string().min(1),
  fp: z
    .string()
    .regex(/^sha256:[0-9a-fA-F]{64}$/, 'fp must be sha256:<64 hex>')
    .optional(),
});
export type QrPayload = z.infer<typeof QrPayloadSchema>;

/** Accepts the QR payload as JSON text (what `phonebridge pair --json` prints) or as an object. */
export function parseQrPayload(input: string | QrPayload): QrPayload {
  let value: unknown = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input);
    } catch {
      throw new Error('pairing payload is not JSON; pass the QR payload printed by `phonebridge pair --json`');
    }
  }
  const parsed = QrPayloadSchema.safeParse(value);
  if (!parsed.success)
    throw new Error(
      `bad pairing payload: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'payload'}: ${i.message}`).join('; ')}`,
    );
  return { ...parsed.data, relay: parsed.data.relay.replace(/\/+$/, '') };
}

export class PairingError extends Error {
  /** `code` is the relay's error string (bad_code, limit_reached, rate_limited, …), already_paired or unreachable. */
  constructor(
    readonly code: string,
    readonly status: number | undefined,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'PairingError';
  }
}

export interface PairOptions {
  stateDir: string;
  qr: QrPayload | string;
  /** Shown on the relay's device list. */
  name: string;
  fetchImpl?: FetchLike;
  timeoutMs?: number;
  /**
   * Tries in all when the relay cannot be reached or answers 5xx. The relay answers a repeat
   * of a pairing that went through (same code, same key) with the same device, so a lost answer
   * is safe to ask again (docs/decisions/0238-a-pairing-repeated-by-its-phone.md). Default 3.
   */
  attempts?: number;
  /** Wait before the second try, doubled for each one after. Default 1 000 ms. */
  retryDelayMs?: number;
  log?: { warn(msg: string): void };
}

const EXPLAIN: Record<string, string> = {
  bad_code: 'the pairing code is wrong, expired or already used; make a new one with `phonebridge pair`',
  limit_reached: "the account's plan allows no more phones; remove one or upgrade",
  rate_limited: 'too many failed pairing attempts from this address; wait ten minutes',
};

export async function pairDevice(opts: PairOptions): Promise<DeviceIdentity> {
  const qr = parseQrPayload(opts.qr);
  ensureStateDir(opts.stateDir, (msg) => opts.log?.warn(msg));
  const existing = loadIdentity(opts.stateDir);
  if (existing && !existing.removed_at) {
    throw new PairingError(
      'already_paired',
      undefined,
      `${opts.stateDir} is already paired as device ${existing.device_id} with ${existing.relay}; use another state dir to pair again`,
    );
  }
  if (existing?.removed_at) rmSync(join(opts.stateDir, KEY_FILE), { force: true }); // a removed device starts over with a fresh key
  if (qr.fp && !qr.relay.startsWith('https:'))
    opts.log?.warn(`the pairing payload pins a TLS key but ${qr.relay} is not https; nothing to pin`);

  const key = loadOrCreateKey(opts.stateDir);
  const attempts = Math.max(1, opts.attempts ?? 3);
  let reply;
  for (let attempt = 1; ; attempt++) {
    const last = attempt >= attempts;
    const again = (why: string) => {
      opts.log?.warn(
        `pairing attempt ${attempt} of ${attempts} failed (${why}); trying again with the same code and key`,
      );
      return sleep((opts.retryDelayMs ?? 1000) * 2 ** (attempt - 1));
    };
    try {
      reply = await postJson(
        relayUrl(qr.relay, '/pair'),
        { code: qr.code, public_key: key.publicKeySpkiBase64, name: opts.name },
        { fp: qr.fp, fetchImpl: opts.fetchImpl, timeoutMs: opts.timeoutMs ?? 15_000 },
      );
    } catch (err) {
      if (err instanceof PinMismatchError) throw err; // says what is wrong already
      if (!last) {
        await again((err as Error).message);
        continue;
      }
      throw new PairingError(
        'unreachable',
        undefined,
        `pairing failed: cannot reach the relay at ${qr.relay} (${(err as Error).message}); check the QR's relay URL and that the relay is up`,
        { cause: err },
      );
    }
    if (reply.status < 500 || last) break;
    await again(`HTTP ${reply.status}`);
  }
  if (reply.status !== 200) {
    const code =
      (reply.body?.error as string | undefined) ?? (reply.status === 429 ? 'rate_limited' : `http_${reply.status}`);
    const detail = EXPLAIN[code] ?? (reply.body?.message as string | undefined) ?? 'unexpected reply';
    throw new PairingError(code, reply.status, `pairing failed (HTTP ${reply.status} ${code}): ${detail}`);
  }
  const { device_id, relay_host } = reply.body ?? {};
  if (typeof device_id !== 'string' || typeof relay_host !== 'string' || !device_id || !relay_host) {
    throw new PairingError(
      'bad_reply',
      reply.status,
      'pairing failed: the relay answered without device_id and relay_host',
    );
  }
  const identity: DeviceIdentity = {
    device_id,
    relay: qr.relay,
    relay_host,
    ...(qr.fp ? { fp: qr.fp } : {}),
    name: opts.name,
  };
  saveIdentity(opts.stateDir, identity);
  return identity;
}
