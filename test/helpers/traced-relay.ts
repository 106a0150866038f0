// A relay in the test's process with tracing on (OTLP/HTTP JSON to a real receiver on
// 127.0.0.1), its log lines captured, and one raw phone: the setup of the span tests in
// test/observability/tracing-*.test.ts.
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.ts';
import { startRelayTracing, stopRelayTracing } from '../../src/observability/tracing.ts';
import { startTestRelay, type TestRelay } from './relay.ts';
import { createLogger } from '../../src/log.ts';
import { challenge, openSocket, pairRaw, serveHandshake, signedHeaders, type OpenSocket } from './raw-device.ts';

export interface Traced {
  receiver: OtlpReceiver;
  relay: TestRelay;
  lines: string[];
  phone: OpenSocket;
  token: string;
  stop(): Promise<void>;
}

export async function startTraced(nodeId: string): Promise<Traced> {
  const receiver = await startOtlpReceiver();
  await startRelayTracing(nodeId, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  const lines: string[] = [];
  const relay = await startTestRelay(['--node-id', nodeId], {
    log: createLogger({ level: 'trace', destination: { write: (l: string) => void lines.push(l) } }),
  });
  const qr = await relay.pair('raw');
  const raw = await pairRaw(relay.url, qr.code);
  const phone = await openSocket(relay.url, signedHeaders(raw, await challenge(relay.url, raw.deviceId)));
  await serveHandshake(phone);
  const token = (await relay.key(raw.deviceId)).token;
  return {
    receiver,
    relay,
    lines,
    phone,
    token,
    async stop() {
      phone.ws.close();
      await relay.stop();
      await stopRelayTracing();
      await receiver.close();
    },
  };
}

export async function waitFor(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
