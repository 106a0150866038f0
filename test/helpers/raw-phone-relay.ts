// One relay with one raw phone (raw-device.ts) paired, connected and ready: the set-up of tests
// that play the phone's side of the socket frame by frame.
import { startTestRelay, waitFor, type TestRelay } from './relay.ts';
import {
  challenge,
  openSocket,
  pairRaw,
  serveHandshake,
  signedHeaders,
  type OpenSocket,
  type RawPhone,
} from './raw-device.ts';

export interface RawPhoneRelay {
  relay: TestRelay;
  phone: RawPhone;
  /** A key for the phone. */
  token: string;
  /** The phone's socket. */
  s: OpenSocket;
  stop(): Promise<void>;
}

export async function rawPhoneRelay(
  opts: { args?: string[]; tools?: unknown[]; capabilities?: Record<string, unknown> } = {},
): Promise<RawPhoneRelay> {
  const relay = await startTestRelay(opts.args);
  const phone = await pairRaw(relay.url, (await relay.pair()).code);
  const token = (await relay.key(phone.deviceId)).token;
  const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  await serveHandshake(s, opts.tools, opts.capabilities);
  await waitFor(() => relay.relay.node.ctx.hub.device(phone.deviceId)?.isReady === true);
  return {
    relay,
    phone,
    token,
    s,
    async stop() {
      s.ws.close();
      await relay.stop();
    },
  };
}
