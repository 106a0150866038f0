// The seed protocol's control plane for the two hand-written relays of `npm run loadtest --
// relay-overhead` (relay.ts on node:http + ws, uws-floor.ts on uWebSockets.js): one device
// paired with one code, a nonce per challenge, the signed upgrade checked. Each relay puts it
// behind its own HTTP layer, so the reference phone connects to either unchanged. In memory,
// one device: a benchmark's, not a product's.
import { randomBytes } from 'node:crypto';
import {
  decodeNonce,
  newNonce,
  parseDevicePublicKey,
  signedPayload,
  verifyDeviceSignature,
} from '../../src/crypto/device-auth.ts';

export interface UpgradeHeaders {
  id: string;
  nonce: string;
  ts: string;
  sig: string;
}

export class BenchControlPlane {
  device?: { id: string; publicKey: string };
  /** host:port as the phone signs it; set once listening. */
  relayHost = '';
  private readonly nonces = new Map<string, string>();

  constructor(private readonly pairingCode: string) {}

  /** POST /pair: the answer, or undefined for a wrong code or a second device (403). */
  pair(body: string): { device_id: string; relay_host: string } | undefined {
    const input = JSON.parse(body) as { code?: string; public_key?: string };
    if (input.code !== this.pairingCode || this.device) return undefined;
    this.device = { id: `dev_${randomBytes(8).toString('hex')}`, publicKey: String(input.public_key) };
    return { device_id: this.device.id, relay_host: this.relayHost };
  }

  /** POST /device/challenge. */
  challenge(body: string): { nonce: string; expires_in: number } {
    const input = JSON.parse(body) as { device_id?: string };
    const nonce = newNonce();
    this.nonces.set(nonce.wire, String(input.device_id));
    return { nonce: nonce.wire, expires_in: 60 };
  }

  /** The upgrade's signature over a nonce issued to this device (each nonce used once). */
  upgradeAllowed(h: UpgradeHeaders): boolean {
    const issuedFor = this.nonces.get(h.nonce);
    this.nonces.delete(h.nonce);
    const device = this.device;
    const nonce = decodeNonce(h.nonce);
    const key = device ? parseDevicePublicKey(device.publicKey) : undefined;
    return !!(
      device &&
      key &&
      nonce &&
      issuedFor === device.id &&
      h.id === device.id &&
      verifyDeviceSignature(key, signedPayload(nonce, this.relayHost, h.ts), h.sig)
    );
  }
}

/** The relay's initialize request to a new phone socket; the answer carries id "init". */
export function initializeFrame(clientName: string): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 'init',
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: clientName, version: '0' } },
  });
}

export const INITIALIZED_FRAME = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
