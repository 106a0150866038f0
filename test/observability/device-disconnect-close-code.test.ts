// The info line a relay writes when a phone socket closes says with which WebSocket close code
// (`closeCode`): the runbook reasons with it (1011 = store, 4003 = auth, 1001 = silence limit,
// 1012 = drain). The logger removes any field named `code` (pairing and authorization codes,
// src/log.ts), so the close code must travel under another name.
import { afterAll, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { startTestPhone, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';

const lines: string[] = [];
let relay: TestRelay | undefined;
afterAll(async () => {
  await relay?.stop();
});

it('the "device disconnected" log line carries the WebSocket close code', async () => {
  relay = await startTestRelay([], {
    log: createLogger({ level: 'info', destination: { write: (l) => void lines.push(l) } }),
  });
  const phone = await startTestPhone(relay, () => createEchoServer());
  await phone.stop(); // the reference phone closes its socket with 1000
  const parsed = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  await waitFor(() => parsed().some((l) => l.msg === 'device disconnected'), 5_000, 'the disconnect line');
  const line = parsed().find((l) => l.msg === 'device disconnected')!;
  expect(line.deviceId).toBe(phone.deviceId);
  expect(line.closeCode, `the disconnect line has no close code: ${JSON.stringify(line)}`).toBe(1000);
});
