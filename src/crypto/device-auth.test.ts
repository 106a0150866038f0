// The accept path's key import (importDevicePublicKey) takes the same keys as the full
// decoder and verifies the same signatures; anything else is refused.
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  checkDeviceSignature,
  generateDeviceKey,
  importDevicePublicKey,
  loadPrivateKey,
  newNonce,
  parseDevicePublicKey,
  signDevicePayload,
  verifyDeviceSignature,
  type SignatureSteps,
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

describe('checkDeviceSignature', () => {
  /** The real steps, counted, and what each key import was asked to import. */
  function counted() {
    const seen = { imports: 0, verifies: 0, importedKinds: [] as Array<string | undefined> };
    const steps: SignatureSteps = {
      async importKey(spki) {
        seen.imports++;
        const key = await importDevicePublicKey(spki);
        seen.importedKinds.push(key && `${key.asymmetricKeyType}/${key.asymmetricKeyDetails?.namedCurve}`);
        return key;
      },
      verify(key, payload, sig) {
        seen.verifies++;
        return verifyDeviceSignature(key, payload, sig);
      },
    };
    return { seen, steps };
  }

  const phone = generateDeviceKey();
  const other = generateDeviceKey();
  const payload = Buffer.from('phonebridge-v1 payload');
  const sig = signDevicePayload(loadPrivateKey(phone.privateKeyPem), payload);

  it.each([
    ['the key it paired with', phone.publicKeySpkiBase64, true],
    ['another paired key', other.publicKeySpkiBase64, false],
    ['an id never paired', undefined, false],
    ['a stored key that does not import', 'AAAA', false],
  ])('imports one key and verifies once against %s (verified: %s)', async (_, spki, expected) => {
    const { seen, steps } = counted();
    expect(await checkDeviceSignature(spki, payload, sig, steps)).toBe(expected);
    expect({ imports: seen.imports, verifies: seen.verifies }).toEqual({ imports: 1, verifies: 1 });
    // An id never paired is checked against a real P-256 key: the same work as a paired one.
    if (spki === undefined) expect(seen.importedKinds).toEqual(['ec/prime256v1']);
  });

  it('refuses an unknown id even when the stand-in key verifies', async () => {
    const { steps } = counted();
    const always: SignatureSteps = { importKey: (spki) => steps.importKey(spki), verify: () => true };
    expect(await checkDeviceSignature(undefined, payload, sig, always)).toBe(false);
    expect(await checkDeviceSignature('AAAA', payload, sig, always)).toBe(false);
    expect(await checkDeviceSignature(phone.publicKeySpkiBase64, payload, 'bm90IGEgc2ln', always)).toBe(true);
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
