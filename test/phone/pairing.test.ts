// Pairing against the real relay: the QR's one-time code redeemed once per state dir, the key
// kept in 0600 files, and the relay's refusals explained.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicKey } from 'node:crypto';
import { pairDevice, PairingError, type PairOptions } from '../../src/device/agent/pairing.ts';
import { IDENTITY_FILE, KEY_FILE, loadIdentity, loadOrCreateKey } from '../../src/device/agent/state.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { removeScratch, scratchDir } from './helpers.ts';

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
  removeScratch();
});

const mode = (path: string) => statSync(path).mode & 0o777;

/** pairDevice with its retries 5 ms apart, its warnings collected in `warnings`. */
const pairQuickly = (stateDir: string, qr: PairOptions['qr'], warnings: string[]) =>
  pairDevice({ stateDir, qr, name: 'retrying', retryDelayMs: 5, log: { warn: (m) => warnings.push(m) } });

describe('pairing with the relay', () => {
  it('creates the dir 0700 and writes 0600 files, with no temp files left behind; the relay stores the same key', async () => {
    const dir = join(scratchDir('pb-state-'), 'nested', 'state');
    const identity = await pairDevice({ stateDir: dir, qr: await relay.pair(), name: 'pixel' });
    expect(mode(dir)).toBe(0o700);
    expect(mode(join(dir, KEY_FILE))).toBe(0o600);
    expect(mode(join(dir, IDENTITY_FILE))).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual([IDENTITY_FILE, KEY_FILE].sort());
    expect(JSON.parse(readFileSync(join(dir, IDENTITY_FILE), 'utf8'))).toEqual({
      device_id: identity.device_id,
      relay: relay.url,
      relay_host: new URL(relay.url).host,
      name: 'pixel',
    });
    const device = await relay.relay.store.store.getDevice(identity.device_id);
    expect(device?.name).toBe('pixel');
    expect(device?.publicKey).toBe(
      createPublicKey(readFileSync(join(dir, KEY_FILE), 'utf8'))
        .export({ type: 'spki', format: 'der' })
        .toString('base64'),
    );
  });

  it('reuses the stored identity and key: pairing happens once', async () => {
    const dir = join(scratchDir('pb-state-'), 's');
    const first = await pairDevice({ stateDir: dir, qr: await relay.pair(), name: 'a' });
    const key = readFileSync(join(dir, KEY_FILE), 'utf8');
    const unused = await relay.pair();
    await expect(pairDevice({ stateDir: dir, qr: unused, name: 'a' })).rejects.toMatchObject({
      code: 'already_paired',
    });
    expect(loadIdentity(dir)).toEqual(first);
    expect(loadOrCreateKey(dir).privateKeyPem).toBe(key);
    // The refused attempt never reached the relay: the code is still good for another phone.
    const other = await pairDevice({ stateDir: join(scratchDir('pb-state-'), 's'), qr: unused, name: 'b' });
    expect(other.device_id).not.toBe(first.device_id);
  });

  it('keeps the key across a refused code, so the retry uses the same one', async () => {
    const dir = join(scratchDir('pb-state-'), 's');
    const bad = JSON.stringify({ v: 1, relay: relay.url, code: 'NOPE-NOPE' });
    const err = await pairDevice({ stateDir: dir, qr: bad, name: 'a' }).catch((e) => e);
    expect(err).toBeInstanceOf(PairingError);
    expect(err).toMatchObject({ code: 'bad_code', status: 403 });
    expect(err.message).toMatch(/wrong, expired or already used/);
    expect(loadIdentity(dir)).toBeUndefined();
    const key = readFileSync(join(dir, KEY_FILE), 'utf8');
    await pairDevice({ stateDir: dir, qr: await relay.pair(), name: 'a' });
    expect(readFileSync(join(dir, KEY_FILE), 'utf8')).toBe(key);
  });

  it('a used code is refused like a wrong one', async () => {
    const qr = await relay.pair();
    await pairDevice({ stateDir: join(scratchDir('pb-state-'), 's'), qr, name: 'first' });
    await expect(
      pairDevice({ stateDir: join(scratchDir('pb-state-'), 's'), qr, name: 'second' }),
    ).rejects.toMatchObject({ code: 'bad_code', status: 403 });
  });

  it('a relay that cannot be reached is named in the error, and the key is kept', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const dir = join(scratchDir('pb-state-'), 's');
    const qr = JSON.stringify({ v: 1, relay: `http://127.0.0.1:${port}`, code: 'ABCD-EFGH' });
    const warnings: string[] = [];
    const err = await pairQuickly(dir, qr, warnings).catch((e) => e);
    expect(warnings).toHaveLength(2); // three tries in all
    expect(err).toBeInstanceOf(PairingError);
    expect(err).toMatchObject({ code: 'unreachable', status: undefined });
    expect(err.message).toBe(
      `pairing failed: cannot reach the relay at http://127.0.0.1:${port} (connect ECONNREFUSED 127.0.0.1:${port}); check the QR's relay URL and that the relay is up`,
    );
    expect(loadIdentity(dir)).toBeUndefined();
    expect(readdirSync(dir)).toEqual([KEY_FILE]);
  });

  it('asks again with the same code and key when the answer is lost or the relay answers 5xx, and gets the one device', async () => {
    // In front of the relay: the first /pair goes through but its answer is cut off (the
    // socket destroyed once the relay has answered), the second is a 503 that never reaches
    // the relay, the third goes through.
    let seen = 0;
    const front = createHttpServer((req, res) => {
      const n = ++seen;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (n === 2) {
          res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"store_unavailable"}');
          return;
        }
        void fetch(`${relay.url}/pair`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: Buffer.concat(chunks),
        }).then(async (r) => {
          const body = await r.text();
          if (n === 1) return void req.socket.destroy();
          res.writeHead(r.status, { 'content-type': 'application/json' }).end(body);
        });
      });
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = front.address() as AddressInfo;
      const qr = { ...(await relay.pair()), relay: `http://127.0.0.1:${port}` };
      const dir = join(scratchDir('pb-state-'), 's');
      const warnings: string[] = [];
      const identity = await pairQuickly(dir, qr, warnings);
      expect(seen).toBe(3);
      expect(warnings).toHaveLength(2);
      expect(warnings[1]).toMatch(/HTTP 503/);
      const key = loadOrCreateKey(dir).publicKeySpkiBase64;
      const devices = (await relay.relay.store.store.listDevices()).filter((d) => d.publicKey === key);
      expect(devices.map((d) => d.id)).toEqual([identity.device_id]);
      expect(loadIdentity(dir)?.device_id).toBe(identity.device_id);
    } finally {
      await new Promise((resolve) => front.close(resolve));
    }
  });
});
