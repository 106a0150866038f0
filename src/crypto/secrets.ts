// Secrets: generated with CSPRNG, stored only as SHA-256, compared in constant time.
import { Buffer } from 'node:buffer';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

export function constantTimeEqualHex(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === bb.length && ab.length > 0 && timingSafeEqual(ab, bb);
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** 160 random bits as base32 (32 chars), shown as eight groups of four. */
export function newPairingCode(): string {
  const bytes = randomBytes(20);
  let bits = 0;
  let acc = 0;
  let out = '';
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out.match(/.{4}/g)!.join('-');
}

/** Canonical form for hashing: upper case, no separators or spaces. undefined if not a well-formed code. */
export function normalizePairingCode(input: unknown): string | undefined {
  if (typeof input !== 'string' || input.length > 64) return undefined;
  const c = input.toUpperCase().replace(/[\s-]/g, '');
  return /^[A-Z2-7]{32}$/.test(c) ? c : undefined;
}

export function hashPairingCode(code: string): string {
  return sha256Hex(`pair:${normalizePairingCode(code) ?? code}`);
}

/** API tokens: "pb_" + 32 random bytes base64url. Only the SHA-256 is kept. */
export function newApiToken(): string {
  return `pb_${randomBytes(32).toString('base64url')}`;
}

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}
