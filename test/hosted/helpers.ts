// Helpers for the hosted-mode tests: phones paired into a given account, plain HTTP with a
// cookie jar (what a browser without JavaScript does), and the SMTP sink that receives sign-in mail.
import { createPairing } from '../../services/cli.ts';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import type { Store } from '../../src/store/types.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { tempDir } from '../helpers/relay.ts';

export interface HostedPhone {
  agent: DeviceAgent;
  deviceId: string;
  stop(): Promise<void>;
}

/** Pairs a phone from a pairing payload and waits for its socket. */
export async function startPhoneWithQr(
  qr: { v: 1; relay: string; code: string },
  name = 'test-phone',
): Promise<HostedPhone> {
  const stateDir = tempDir('pb-hphone-');
  const identity = await DeviceAgent.pair({ stateDir, qr, name, log: silentLogger });
  const agent = new DeviceAgent({
    stateDir,
    createServer: () => createEchoServer(),
    log: silentLogger,
    backoff: { baseMs: 50, capMs: 500 },
  });
  const connected = new Promise<void>((resolve) => agent.once('connected', () => resolve()));
  agent.start();
  await connected;
  return { agent, deviceId: identity.device_id, stop: () => agent.stop() };
}

/** A phone paired into `accountId` through the store (as the dashboard or `pair --account` does). */
export async function startAccountPhone(store: Store, relay: string, accountId: string, name?: string) {
  const qr = await createPairing(store, { accountId, relay });
  return startPhoneWithQr(qr, name);
}
