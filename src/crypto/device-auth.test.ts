// The accept path's key import (importDevicePublicKey) takes the same keys as the full
// decoder and verifies the same signatures; anything else is refused.
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  generateDeviceKey,
  importDevicePublicKey,
  loadPrivateKey,
  newNonce,
  parseDevicePublicKey,
  signDevicePayload,
  verifyDeviceSignature,
} from './device-auth.ts';

describe('importDevicePublicKey', () => {
  it('imports a P-256 key as phones send it and verifies its signatures, not others', async () => {
    const k = generateDeviceKey();
    const payload = Buffer.from('phonebridge-v1 payload');
    const sig = signDevicePayload(loadPrivateKey(k.privateKeyPem), payload);
    const key = await importDevicePublicKey(k.publicKeySpkiBase64);
    expect(key).toBeDefined();
    expect(verifyDeviceSignature(key!, payload, sig)).toBe(true);
    expect(verifyDeviceSignature(key!, Buffer.from('another payload'), sig)).toBe(false);
    const other = signDevicePayload(loadPrivateKey(generateDeviceKey().privateKeyPem), payload);
    expect(verifyDeviceSignature(key!, payload, other)).toBe(false);
    // The same key as the full decoder's.
    expect(key!.export({ format: 'der', type: 'spki' }).toString('base64')).toBe(k.publicKeySpkiBase64);
  });

  it('refuses a point that is not on the curve, like the full decoder', async () => {
    const der = Buffer.from(generateDeviceKey().publicKeySpkiBase64, 'base64');
    der[der.length - 1] ^= 1; // Y no longer matches X
    expect(parseDevicePublicKey(der.toString('base64'))).toBeUndefined();
    expect(await importDevicePublicKey(der.toString('base64'))).toBeUndefined();
  });

  it('refuses other curves, other key types and garbage', async () => {
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey.export({
      format: 'der',
      type: 'spki',
    });
    const ed = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' });
    for (const b64 of [p384.toString('base64'), ed.toString('base64'), 'bm90IGEga2V5', ''])
      expect(await importDevicePublicKey(b64)).toBeUndefined();
  });
});

describe('newNonce', () => {
  it('gives 32 bytes of its own each time, across refills of its pool', () => {
    const seen = new Set<string>();
    const raws: Buffer[] = [];
    for (let i = 0; i < 300; i++) {
      const n = newNonce();
      expect(n.raw).toHaveLength(32);
      expect(Buffer.from(n.wire, 'base64url').equals(n.raw)).toBe(true);
      seen.add(n.wire);
      raws.push(n.raw);
    }
    expect(seen.size).toBe(300);
    // Earlier nonces are not overwritten by later ones.
    expect(new Set(raws.map((r) => r.toString('base64url')))).toEqual(seen);
  });
});
