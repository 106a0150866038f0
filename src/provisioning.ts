// What `phonebridge pair` and `keys create` do, as functions: used by the CLI, `npm start`
// (services/demo.ts), hosted mode's dashboard, the test harnesses and the load tests. In src/ so
// that library code can use it too (services/ uses src/, never the reverse; test/import-cycles.test.ts).
import { hashPairingCode, newApiToken, newId, newPairingCode, sha256Hex } from './crypto/secrets.ts';
import { SCOPES, type Scope, type Store } from './store/index.ts';

export interface QrPayload {
  v: 1;
  relay: string;
  code: string;
  fp?: string;
}

/** Longest phone name, in code points (docs/PROTOCOL.md "Pairing"). */
export const MAX_DEVICE_NAME = 100;

// C0 and C1 controls (NUL, ESC, line breaks, tabs…) and the bidi embedding, override and isolate
// marks: with any whitespace around them they become one space (docs/decisions/0224-phone-names.md).
const NAME_CONTROLS = /\s*(?:[\p{Cc}\u202A-\u202E\u2066-\u2069]\s*)+/gu;
// In a `u` pattern a surrogate range matches only halves without their pair.
const LONE_SURROGATE = /[\uD800-\uDFFF]/gu;

/**
 * A phone's name as it is stored and shown, whether the phone sent it to /pair or the owner gave
 * it to the code (CLI, hosted dashboard): no control characters (Postgres refuses a NUL; an
 * escape sequence or a line break reaches the terminal of whoever runs `devices list`),
 * well-formed (a lone surrogate half becomes U+FFFD), at most MAX_DEVICE_NAME code points (an
 * emoji is never cut in half), trimmed. '' when nothing is left.
 */
export function deviceName(raw: string): string {
  const clean = raw.replace(NAME_CONTROLS, ' ').replace(LONE_SURROGATE, '\uFFFD').trim();
  return Array.from(clean).slice(0, MAX_DEVICE_NAME).join('').trimEnd();
}

/** Creates a pairing code; the QR payload is what the phone scans. */
export async function createPairing(
  store: Store,
  opts: { accountId?: string; name?: string | null; relay: string; fp?: string; now?: Date },
): Promise<QrPayload> {
  const code = newPairingCode();
  const now = opts.now ?? new Date();
  const r = await store.createPairingCode({
    accountId: opts.accountId ?? 'local',
    codeHash: hashPairingCode(code),
    expiresAt: new Date(now.getTime() + 10 * 60_000),
    // The owner's name wins over the phone's at redemption: cleaned as the phone's would be.
    name: (opts.name && deviceName(opts.name)) || null,
  });
  if (!r.ok) throw new Error('the account is at its plan limit for phones');
  return { v: 1, relay: opts.relay, code, ...(opts.fp ? { fp: opts.fp } : {}) };
}

/** Mints an API key bound to one device. The token is shown once; only its hash is stored. */
export async function createKey(
  store: Store,
  deviceId: string,
  scopes: Scope[] = [...SCOPES],
): Promise<{ id: string; token: string; device_id: string; scopes: Scope[] }> {
  const device = await store.getDevice(deviceId);
  if (!device) throw new Error(`no device "${deviceId}"`);
  const token = newApiToken();
  const r = await store.createToken({
    id: newId('key'),
    accountId: device.accountId,
    deviceId,
    hash: sha256Hex(token),
    scopes,
    via: 'key',
  });
  if (!r.ok)
    throw new Error(
      r.error === 'limit_reached' ? 'the account is at its plan limit for keys' : `no device "${deviceId}"`,
    );
  return { id: r.token.id, token, device_id: deviceId, scopes };
}

/**
 * Registers `count` phones with one public key straight in the store — what `/pair` does for
 * each, without HTTP (load tests: their light phones share a key). Returns the device ids.
 */
export async function registerDevices(
  store: Store,
  opts: { relay: string; count: number; publicKey: string; namePrefix: string },
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < opts.count; i++) {
    const qr = await createPairing(store, { relay: opts.relay, name: null });
    const r = await store.redeemPairingCode({
      codeHash: hashPairingCode(qr.code),
      deviceId: newId('dev'),
      publicKey: opts.publicKey,
      name: `${opts.namePrefix}${i}`,
      now: new Date(),
    });
    if (!r.ok) throw new Error(`registering phone ${i}: ${r.error}`);
    ids.push(r.device.id);
  }
  return ids;
}
