// `node --import tsx loadtest/key-import.bench.ts`: CPU per import of a phone's stored P-256
// key (base64 SPKI) plus one verification with it, by three imports that all reject a point
// off the curve — the relay's own import (importDevicePublicKey: WebCrypto's raw point), a JWK
// through createPublicKey, and the SPKI DER decoder (parseDevicePublicKey) — in alternating rounds in one process, distinct
// keys, so the shared cores' load moves all three alike (docs/BENCHMARKS.md, "storm").
import { createPublicKey, type KeyObject } from 'node:crypto';
import {
  generateDeviceKey,
  importDevicePublicKey,
  loadPrivateKey,
  parseDevicePublicKey,
  signDevicePayload,
  verifyDeviceSignature,
} from '../src/crypto/device-auth.ts';

const PREFIX = 26; // bytes of the fixed P-256 SPKI header before the point
const keys = Array.from({ length: 256 }, () => generateDeviceKey());
const payload = Buffer.alloc(120, 7);
const sigs = keys.map((k) => signDevicePayload(loadPrivateKey(k.privateKeyPem), payload));

function refusedIfUndefined(key: KeyObject | undefined): KeyObject {
  if (!key) throw new Error('key refused');
  return key;
}

const imports: Record<string, (spki: string) => KeyObject | Promise<KeyObject>> = {
  async webcryptoRaw(spki) {
    return refusedIfUndefined(await importDevicePublicKey(spki));
  },
  jwk(spki) {
    const der = Buffer.from(spki, 'base64');
    const x = der.toString('base64url', PREFIX + 1, PREFIX + 33);
    const y = der.toString('base64url', PREFIX + 33, PREFIX + 65);
    return createPublicKey({ key: { kty: 'EC', crv: 'P-256', x, y }, format: 'jwk' });
  },
  spkiDer: (spki) => refusedIfUndefined(parseDevicePublicKey(spki)),
};

async function round(f: (spki: string) => KeyObject | Promise<KeyObject>, verify: boolean): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < keys.length; i++) {
    const key = await f(keys[i].publicKeySpkiBase64);
    if (verify && !verifyDeviceSignature(key, payload, sigs[i])) throw new Error('verification failed');
  }
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / keys.length;
}

// A point off the curve must be refused by each.
const bad = Buffer.from(keys[0].publicKeySpkiBase64, 'base64');
bad[bad.length - 1] ^= 1;
for (const [name, f] of Object.entries(imports)) {
  const accepted = await Promise.resolve()
    .then(() => f(bad.toString('base64')))
    .then(
      () => true,
      () => false,
    );
  if (accepted) throw new Error(`${name} accepted a point off the curve`);
}

for (const verify of [false, true]) {
  const per: Record<string, number[]> = {};
  for (let r = 0; r < 12; r++)
    for (const [name, f] of Object.entries(imports)) (per[name] ??= []).push(await round(f, verify));
  for (const [name, v] of Object.entries(per)) {
    const s = v.slice(2).sort((a, b) => a - b);
    console.log(
      `${verify ? 'import + verify' : 'import'}, ${name}: median ${s[s.length >> 1].toFixed(1)} µs CPU (rounds ${s[0].toFixed(1)}–${s[s.length - 1].toFixed(1)})`,
    );
  }
}
