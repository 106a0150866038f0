import { generateKeyPairSync } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseQrPayload } from './pairing.ts';
import { ensureStateDir, IDENTITY_FILE, KEY_FILE, loadIdentity, loadOrCreateKey, loadPrivateKeyFrom } from './state.ts';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'pb-state-'));
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

const mode = (path: string) => statSync(path).mode & 0o777;

// Pairing against the relay (0600 files, one pairing per dir, key kept across a refused code)
// is in test/phone/pairing.test.ts; these need no relay.
describe('state dir', () => {
  it('creates a missing dir 0700 and a key file 0600, and reuses the key', () => {
    const dir = join(root, 'nested', 'state');
    ensureStateDir(dir);
    expect(mode(dir)).toBe(0o700);
    const key = loadOrCreateKey(dir);
    expect(mode(join(dir, KEY_FILE))).toBe(0o600);
    expect(loadOrCreateKey(dir).privateKeyPem).toBe(key.privateKeyPem);
    expect(loadIdentity(dir)).toBeUndefined();
  });

  it('warns about an existing dir that others can read, and leaves its mode alone', () => {
    const warnings: string[] = [];
    ensureStateDir(root, (m) => warnings.push(m)); // mkdtemp makes it 0700: fine
    expect(warnings).toEqual([]);
    chmodSync(root, 0o755);
    ensureStateDir(root, (m) => warnings.push(m));
    expect(warnings).toEqual([expect.stringMatching(/accessible to other users/)]);
    expect(mode(root)).toBe(0o755);
  });
  it('names the file when device.json is not a JSON object', () => {
    for (const text of ['{"device_id":', 'null', '[]']) {
      writeFileSync(join(root, IDENTITY_FILE), text);
      expect(() => loadIdentity(root)).toThrow(`${join(root, IDENTITY_FILE)} is`);
    }
  });

  it('names the file when the key is not a P-256 private key, and prints none of it', () => {
    const ed25519 = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    for (const pem of ['garbage', ed25519.slice(0, 60), ed25519]) {
      writeFileSync(join(root, KEY_FILE), pem);
      for (const load of [() => loadOrCreateKey(root), () => loadPrivateKeyFrom(root)]) {
        expect(load).toThrow(`${join(root, KEY_FILE)} does not hold a P-256 private key`);
        expect(load).not.toThrow(pem.slice(30, 50));
      }
    }
  });

  it('refuses a state dir that is a file', () => {
    const file = join(root, 'file');
    writeFileSync(file, '');
    expect(() => ensureStateDir(file)).toThrow(`state dir ${file} is not a directory`);
    expect(() => loadIdentity(file)).toThrow(`state dir ${file} is not a directory`);
    expect(() => loadIdentity(join(file, 'sub'))).toThrow(`state dir ${join(file, 'sub')} is not a directory`);
  });
});

describe('QR payload', () => {
  it('accepts the documented shape and trims a trailing slash', () => {
    const fp = 'sha256:' + 'ab'.repeat(32);
    expect(parseQrPayload(`{"v":1,"relay":"https://r.example.com/","code":"ABCD-EFGH","fp":"${fp}"}`)).toEqual({
      v: 1,
      relay: 'https://r.example.com',
      code: 'ABCD-EFGH',
      fp,
    });
  });
  it('refuses other shapes with a clear message', () => {
    expect(() => parseQrPayload('not json')).toThrow(/not JSON/);
    expect(() => parseQrPayload('{"v":2,"relay":"http://x","code":"A"}')).toThrow(/bad pairing payload: v/);
    expect(() => parseQrPayload('{"v":1,"relay":"ftp://x","code":"A"}')).toThrow(/relay must be an http/);
    expect(() => parseQrPayload('{"v":1,"relay":"http://x","code":"A","fp":"md5:00"}')).toThrow(/fp must be/);
  });
});
