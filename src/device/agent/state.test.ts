import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pairDevice, PairingError, parseQrPayload } from './pairing.ts';
import { ensureStateDir, IDENTITY_FILE, KEY_FILE, loadIdentity, loadOrCreateKey } from './state.ts';
import { TestRelay } from './test-relay.ts';

let root: string;
let relay: TestRelay;
beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'pb-state-'));
  relay = await new TestRelay().listen();
});
afterEach(async () => {
  await relay.close();
  rmSync(root, { recursive: true, force: true });
});

const mode = (path: string) => statSync(path).mode & 0o777;

describe('state dir', () => {
  it('creates the dir 0700 and writes 0600 files, with no temp files left behind', async () => {
    const dir = join(root, 'nested', 'state');
    const identity = await pairDevice({ stateDir: dir, qr: relay.qr(), name: 'pixel' });
    expect(mode(dir)).toBe(0o700);
    expect(mode(join(dir, KEY_FILE))).toBe(0o600);
    expect(mode(join(dir, IDENTITY_FILE))).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual([IDENTITY_FILE, KEY_FILE].sort());
    expect(JSON.parse(readFileSync(join(dir, IDENTITY_FILE), 'utf8'))).toEqual({ device_id: identity.device_id, relay: relay.url, relay_host: 'relay.test', name: 'pixel' });
    expect(relay.devices.get(identity.device_id)?.name).toBe('pixel');
  });

  it('reuses the stored identity and key: pairing happens once', async () => {
    const dir = join(root, 's');
    const first = await pairDevice({ stateDir: dir, qr: relay.qr(), name: 'a' });
    const key = readFileSync(join(dir, KEY_FILE), 'utf8');
    await expect(pairDevice({ stateDir: dir, qr: relay.qr(), name: 'a' })).rejects.toMatchObject({ code: 'already_paired' });
    expect(loadIdentity(dir)).toEqual(first);
    expect(loadOrCreateKey(dir).privateKeyPem).toBe(key);
  });

  it('keeps the key across a failed pairing, so the retry uses the same one', async () => {
    const dir = join(root, 's');
    const bad = JSON.stringify({ v: 1, relay: relay.url, code: 'NOPE-NOPE' });
    const err = await pairDevice({ stateDir: dir, qr: bad, name: 'a' }).catch((e) => e);
    expect(err).toBeInstanceOf(PairingError);
    expect(err).toMatchObject({ code: 'bad_code', status: 403 });
    expect(err.message).toMatch(/wrong, expired or already used/);
    expect(loadIdentity(dir)).toBeUndefined();
    const key = readFileSync(join(dir, KEY_FILE), 'utf8');
    await pairDevice({ stateDir: dir, qr: relay.qr(), name: 'a' });
    expect(readFileSync(join(dir, KEY_FILE), 'utf8')).toBe(key);
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
});

describe('QR payload', () => {
  it('accepts the documented shape and trims a trailing slash', () => {
    const fp = 'sha256:' + 'ab'.repeat(32);
    expect(parseQrPayload(`{"v":1,"relay":"https://r.example.com/","code":"ABCD-EFGH","fp":"${fp}"}`)).toEqual({ v: 1, relay: 'https://r.example.com', code: 'ABCD-EFGH', fp });
  });
  it('refuses other shapes with a clear message', () => {
    expect(() => parseQrPayload('not json')).toThrow(/not JSON/);
    expect(() => parseQrPayload('{"v":2,"relay":"http://x","code":"A"}')).toThrow(/bad pairing payload: v/);
    expect(() => parseQrPayload('{"v":1,"relay":"ftp://x","code":"A"}')).toThrow(/relay must be an http/);
    expect(() => parseQrPayload('{"v":1,"relay":"http://x","code":"A","fp":"md5:00"}')).toThrow(/fp must be/);
  });
});
