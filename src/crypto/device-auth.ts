// The device signature that ties a phone's key to one relay host
// (docs/decisions/0009-pairing-and-device-auth-encodings.md, 0010-signature-binds-relay-host.md).
// Shared by the relay (verify) and the reference phone (sign) so both sides agree on the bytes.
import { Buffer } from 'node:buffer';
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  verify,
  webcrypto,
  KeyObject,
} from 'node:crypto';
import { keptBytes } from '../protocol/json-bytes.ts';

export const PROTOCOL_TAG = 'phonebridge-v1';
export const NONCE_BYTES = 32;

/** "phonebridge-v1" || 32 raw nonce bytes || relay host (UTF-8) || ts (decimal ASCII). */
export function signedPayload(nonce: Buffer, relayHost: string, ts: number | string): Buffer {
  return Buffer.concat([TAG_BYTES, nonce, hostBytes(relayHost), Buffer.from(String(ts), 'ascii')]);
}

const TAG_BYTES = Buffer.from(PROTOCOL_TAG, 'utf8');
// A relay signs against one host (its --public-url) for its whole life: encoded once.
const hostBytes = keptBytes((host) => host);

// Nonces are cut from a pool of random bytes: one call into the CSPRNG per 128 challenges.
// Every nonce is its own 32 bytes (a view of a pool that is replaced, never refilled).
const NONCE_POOL = NONCE_BYTES * 128;
let noncePool = Buffer.alloc(0);
let noncePoolAt = 0;

export function newNonce(): { raw: Buffer; wire: string } {
  if (noncePoolAt + NONCE_BYTES > noncePool.length) {
    noncePool = randomBytes(NONCE_POOL);
    noncePoolAt = 0;
  }
  const raw = noncePool.subarray(noncePoolAt, (noncePoolAt += NONCE_BYTES));
  return { raw, wire: raw.toString('base64url') };
}

/** Decodes a nonce as sent in X-Device-Nonce; undefined unless it is exactly 32 bytes of base64url. */
export function decodeNonce(wire: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(wire)) return undefined;
  const raw = Buffer.from(wire, 'base64url');
  return raw.length === NONCE_BYTES ? raw : undefined;
}

/** Parses base64 P-256 SPKI DER; undefined if it is anything else. */
export function parseDevicePublicKey(spkiBase64: string): KeyObject | undefined {
  try {
    const der = Buffer.from(spkiBase64, 'base64');
    if (der.length < 60 || der.length > 200) return undefined;
    const key = createPublicKey({ key: der, format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') return undefined;
    return key;
  } catch {
    return undefined;
  }
}

/**
 * The key a phone sent to /pair, as the relay stores it: standard base64 of its SPKI DER, or
 * undefined if it is not a P-256 key in base64. Whitespace is allowed (Android's Base64.DEFAULT
 * wraps lines); any other character outside the alphabet is refused rather than skipped, as
 * Buffer's decoder would, so what is stored is exactly the key's DER and nothing else.
 */
export function canonicalDevicePublicKey(input: string): string | undefined {
  const b64 = input.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return undefined;
  return parseDevicePublicKey(b64)?.export({ format: 'der', type: 'spki' }).toString('base64');
}

/** DER of a P-256 SubjectPublicKeyInfo up to its uncompressed point (0x04 || X || Y): how phones send their keys. */
const P256_SPKI_PREFIX = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex');
const P256_SPKI_BYTES = P256_SPKI_PREFIX.length + 65;
const ECDSA_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;

/**
 * The same key as parseDevicePublicKey, for verifying a signature on the accept path. OpenSSL
 * 3's DER decoder costs about twice a P-256 verification; the common encoding (the fixed SPKI
 * header and an uncompressed point) is imported as a raw point instead, which OpenSSL still
 * checks is on the curve (docs/decisions/0140-cheaper-device-accepts.md). Anything else takes
 * the full decoder.
 */
export async function importDevicePublicKey(spkiBase64: string): Promise<KeyObject | undefined> {
  const der = Buffer.from(spkiBase64, 'base64');
  if (
    der.length === P256_SPKI_BYTES &&
    der[P256_SPKI_PREFIX.length] === 0x04 &&
    der.subarray(0, P256_SPKI_PREFIX.length).equals(P256_SPKI_PREFIX)
  ) {
    try {
      const point = der.subarray(P256_SPKI_PREFIX.length);
      return KeyObject.from(await webcrypto.subtle.importKey('raw', point, ECDSA_P256, false, ['verify']));
    } catch {
      return undefined; // not a point on P-256
    }
  }
  return parseDevicePublicKey(spkiBase64);
}

export function verifyDeviceSignature(publicKey: KeyObject, payload: Buffer, sigBase64: string): boolean {
  try {
    return verify('sha256', payload, { key: publicKey, dsaEncoding: 'der' }, Buffer.from(sigBase64, 'base64'));
  } catch {
    return false;
  }
}

/** The two steps of a signature check, replaceable so that a test can count them. */
export interface SignatureSteps {
  importKey(spkiBase64: string): Promise<KeyObject | undefined>;
  verify(publicKey: KeyObject, payload: Buffer, sigBase64: string): boolean;
}

const REAL_STEPS: SignatureSteps = { importKey: importDevicePublicKey, verify: verifyDeviceSignature };

/** A P-256 public key whose private half was dropped at once: nothing it checks can verify. */
let standIn: { spki: string; key: KeyObject } | undefined;
function standInKey(): { spki: string; key: KeyObject } {
  if (!standIn) {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    standIn = { spki: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), key: publicKey };
  }
  return standIn;
}

/**
 * Whether `sigBase64` is the phone's signature of `payload`, by the key it paired with
 * (`spkiBase64`; undefined for an id the relay does not know). Every check imports one key and
 * verifies once: an unknown id, or a stored key that does not import, is checked against a
 * stand-in key nobody can sign for. So the time to a refusal does not tell an id never paired
 * from a removed one or from a paired one signed for by another key
 * (docs/decisions/0240-device-auth-takes-the-same-work-for-every-id.md).
 */
export async function checkDeviceSignature(
  spkiBase64: string | undefined,
  payload: Buffer,
  sigBase64: string,
  steps: SignatureSteps = REAL_STEPS,
): Promise<boolean> {
  const key = await steps.importKey(spkiBase64 ?? standInKey().spki);
  const verified = steps.verify(key ?? standInKey().key, payload, sigBase64);
  return spkiBase64 !== undefined && key !== undefined && verified;
}

export function signDevicePayload(privateKey: KeyObject, payload: Buffer): string {
  return sign('sha256', payload, { key: privateKey, dsaEncoding: 'der' }).toString('base64');
}

export interface DeviceKeyPair {
  privateKeyPem: string;
  publicKeySpkiBase64: string;
}

export function generateDeviceKey(): DeviceKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKeySpkiBase64: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
  };
}

export function loadPrivateKey(pem: string): KeyObject {
  return createPrivateKey(pem);
}
