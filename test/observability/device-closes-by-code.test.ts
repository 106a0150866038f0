// phonebridge_device_closes_total counts a relay close code (1001, 1011, …) only when the relay
// closed the socket: the chart's alerts read it so (PhonebridgeDeviceRelayErrors on 1011,
// PhonebridgeDeviceIdleCloses on 1001). A phone that closes its own socket with one of those
// codes (the reference phone sends 1011 when its MCP server fails; any client may send 1001,
// "going away") counts as `other` (docs/decisions/0250-close-codes-count-the-relay-s-closes.md).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { challenge, openSocket, pairRaw, serveHandshake, signedHeaders } from '../helpers/raw-device.ts';
import { sample } from '../helpers/metrics.ts';

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
});

/** A raw phone paired, connected and ready, that then closes its own socket with `code`. */
async function phoneClosesWith(code: number): Promise<void> {
  const qr = await relay.pair();
  const phone = await pairRaw(relay.url, qr.code);
  const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  await serveHandshake(s);
  s.ws.close(code, 'phone side');
  await s.closed;
  await new Promise((r) => setTimeout(r, 200));
}

it('a phone closing its own socket with 1011 is not counted as a relay 1011 (PhonebridgeDeviceRelayErrors)', async () => {
  const before = (await sample('phonebridge_device_closes_total', '{code="1011"}')) ?? 0;
  const otherBefore = (await sample('phonebridge_device_closes_total', '{code="other"}')) ?? 0;
  await phoneClosesWith(1011);
  const after = (await sample('phonebridge_device_closes_total', '{code="1011"}')) ?? 0;
  expect((await sample('phonebridge_device_closes_total', '{code="other"}')) ?? 0, 'counted as other').toBe(
    otherBefore + 1,
  );
  expect(
    after - before,
    'phonebridge_device_closes_total{code="1011"} moved for a close the PHONE sent; the runbook reads it as the relay failing to authenticate/initialize phones (Postgres)',
  ).toBe(0);
});

it('a phone closing its own socket with 1001 is not counted as a close at the silence limit (PhonebridgeDeviceIdleCloses)', async () => {
  const before = (await sample('phonebridge_device_closes_total', '{code="1001"}')) ?? 0;
  await phoneClosesWith(1001);
  const after = (await sample('phonebridge_device_closes_total', '{code="1001"}')) ?? 0;
  expect(
    after - before,
    'phonebridge_device_closes_total{code="1001"} moved for a close the PHONE sent ("going away"); the alert reads it as the relay closing a half-open socket at --device-idle-ms',
  ).toBe(0);
});

it('a phone closing with 1000 still counts as 1000', async () => {
  const before = (await sample('phonebridge_device_closes_total', '{code="1000"}')) ?? 0;
  await phoneClosesWith(1000);
  expect(((await sample('phonebridge_device_closes_total', '{code="1000"}')) ?? 0) - before).toBe(1);
});
