// Registers and connects a population of light phones to a relay node, and mints API keys
// for the ones clients will call. Bounded: connections go `concurrency` at a time, each
// attempt has a timeout, and a phone that fails is retried a fixed number of times.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import type { RelayChild } from '../fleet-relay.ts';
import { keepAliveAgents, LightPhone, loopbackAddresses, type LightPhoneOptions, type Surface } from './light-phone.ts';

export interface Population {
  phones: LightPhone[];
  /** Where every phone of this population connects; change it to re-point them all. */
  endpoint: { url: string; host: string };
  key: KeyObject;
  /** The phones' public key as registered (base64 SPKI DER, the store's encoding). */
  publicKeySpkiBase64: string;
  connected(): number;
  closeAll(): Promise<void>;
}

/** Runs fn(i) for i < count, at most `limit` at once. */
export async function pool(count: number, limit: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, count)) }, worker));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function connectPhones(opts: {
  relay: Pick<RelayChild, 'url' | 'devices'>;
  count: number;
  surface: Surface | ((i: number) => Surface);
  /** Source addresses to spread over (127.0.0.2 …): ~28k ephemeral ports each. */
  addresses?: number;
  concurrency?: number;
  onCall?: LightPhoneOptions['onCall'];
  onCancelled?: LightPhoneOptions['onCancelled'];
  onClose?: LightPhoneOptions['onClose'];
  reconnectDelayMs?: LightPhoneOptions['reconnectDelayMs'];
  onReconnected?: LightPhoneOptions['onReconnected'];
  /** The phones' key (already registered with their ids); default: a new one. */
  keyPair?: { privateKeyPem: string; publicKeySpkiBase64: string };
  /** A phone's own key instead, where each phone paired with its own (enrolled phones). */
  keyFor?: (deviceId: string) => KeyObject;
  /** Stop connecting after this (performance.now()); the phones so far are kept. */
  until?: number;
  onProgress?(connected: number): void;
}): Promise<Population> {
  const pair = opts.keyPair ?? generateDeviceKey();
  const key = createPrivateKey(pair.privateKeyPem);
  const ids = await opts.relay.devices(opts.count, pair.publicKeySpkiBase64);
  // At most 4,000 phones per source address: each address gets ~28k ephemeral ports, and the
  // relay allows 6,000 challenges a minute per address (src/gateway/device-socket.ts), which a
  // quick machine connecting one address's phones reaches within the minute.
  const addresses = loopbackAddresses(opts.addresses ?? Math.ceil(opts.count / 4_000));
  const agents = keepAliveAgents(addresses);
  const endpoint = { url: opts.relay.url, host: new URL(opts.relay.url).host };
  const phones = ids.map((deviceId, i) => {
    const localAddress = addresses[i % addresses.length];
    return new LightPhone({
      deviceId,
      endpoint,
      key: opts.keyFor?.(deviceId) ?? key,
      surface: typeof opts.surface === 'function' ? opts.surface(i) : opts.surface,
      localAddress,
      agent: agents.get(localAddress),
      onCall: opts.onCall,
      onCancelled: opts.onCancelled,
      onClose: opts.onClose,
      reconnectDelayMs: opts.reconnectDelayMs,
      onReconnected: opts.onReconnected,
    });
  });
  let up = 0;
  await pool(phones.length, opts.concurrency ?? 100, async (i) => {
    if (opts.until !== undefined && performance.now() > opts.until) return;
    for (let attempt = 1; ; attempt++) {
      try {
        await phones[i].connect();
        up++;
        opts.onProgress?.(up);
        return;
      } catch (err) {
        if (attempt >= 3) throw new Error(`phone ${i} could not connect: ${(err as Error).message}`, { cause: err });
        await sleep(200 * attempt);
      }
    }
  });
  // Idle keep-alive sockets would hold descriptors; the agents open new ones when asked again.
  for (const a of agents.values()) a.destroy();
  return {
    phones,
    endpoint,
    key,
    publicKeySpkiBase64: pair.publicKeySpkiBase64,
    connected: () => phones.reduce((n, p) => n + (p.ready && p.open ? 1 : 0), 0),
    closeAll: () => pool(phones.length, 500, (i) => phones[i].close()),
  };
}
