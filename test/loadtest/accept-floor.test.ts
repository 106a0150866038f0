// The storm's accept floor (loadtest/lib/accept-floor.ts, docs/decisions/0143-the-floor-verifies.md)
// does what the protocol forces on a node that has never seen the phone: a phone whose
// signature checks out gets initialize; a wrong signature, a reused nonce or an unknown device
// is refused with 4003, as the relay refuses them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  decodeNonce,
  generateDeviceKey,
  loadPrivateKey,
  signDevicePayload,
  signedPayload,
} from '../../src/crypto/device-auth.ts';
import { startAcceptFloor, type AcceptFloor } from '../../loadtest/lib/accept-floor.ts';

const phone = generateDeviceKey();
const other = generateDeviceKey();
let floor: AcceptFloor;

beforeAll(async () => {
  floor = await startAcceptFloor([['dev-a', phone.publicKeySpkiBase64]]);
});
afterAll(() => floor?.kill());

async function challenge(deviceId: string): Promise<string> {
  const r = await fetch(`${floor.url}/device/challenge`, {
    method: 'POST',
    body: JSON.stringify({ device_id: deviceId }),
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { nonce: string }).nonce;
}

/** Upgrades with the given headers; resolves with the first frame, or the close code. */
function upgrade(deviceId: string, nonce: string, privateKeyPem: string): Promise<{ frame?: string; code?: number }> {
  const host = new URL(floor.url).host;
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = signDevicePayload(loadPrivateKey(privateKeyPem), signedPayload(decodeNonce(nonce)!, host, ts));
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${floor.url.replace(/^http/, 'ws')}/device/ws`, {
      headers: {
        'X-Device-Id': deviceId,
        'X-Device-Nonce': nonce,
        'X-Device-Ts': ts,
        'X-Device-Sig': sig,
        'X-Device-App': 'test/1',
      },
    });
    ws.on('message', (d) => {
      resolve({ frame: (d as Buffer).toString('utf8') });
      ws.close();
    });
    ws.on('close', (code) => resolve({ code }));
    ws.on('error', reject);
  });
}

describe('accept floor', () => {
  it('sends initialize to a phone whose signature verifies with its stored key', async () => {
    const got = await upgrade('dev-a', await challenge('dev-a'), phone.privateKeyPem);
    expect(JSON.parse(got.frame!)).toMatchObject({ method: 'initialize' });
  });

  it('refuses a wrong key, a reused nonce and an unknown device with 4003', async () => {
    const before = (await floor.counts()).rejected;
    expect(await upgrade('dev-a', await challenge('dev-a'), other.privateKeyPem)).toEqual({ code: 4003 });
    const nonce = await challenge('dev-a');
    expect((await upgrade('dev-a', nonce, phone.privateKeyPem)).frame).toBeDefined();
    expect(await upgrade('dev-a', nonce, phone.privateKeyPem)).toEqual({ code: 4003 });
    expect(await upgrade('dev-b', await challenge('dev-b'), phone.privateKeyPem)).toEqual({ code: 4003 });
    expect((await floor.counts()).rejected - before).toBe(3);
  });
});
