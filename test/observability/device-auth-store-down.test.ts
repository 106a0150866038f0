// phonebridge_device_auth_total{outcome="rejected"} counts phones refused (4003, 4004): the
// chart's PhonebridgeDeviceAuthRejections reads it as a changed publicUrl, revoked phones or
// probing. A phone the relay could not check because the store is unreachable (closed with
// 1011, retry) is the relay's fault, with its own alert (PhonebridgeDeviceRelayErrors): it
// counts as outcome="error".
import { afterAll, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { challenge, openSocket, pairRaw, signedHeaders } from '../helpers/raw-device.ts';
import { sample } from '../helpers/metrics.ts';
import { startToxiproxy, type Toxiproxy } from '../helpers/toxiproxy.ts';
import { createDatabase } from '../cluster/harness.ts';

let tp: Toxiproxy | undefined;
let db: { url: string; drop(): Promise<void> } | undefined;
let relay: TestRelay | undefined;
afterAll(async () => {
  await relay?.stop().catch(() => {});
  await tp?.stop();
  await db?.drop().catch(() => {});
}, 60_000);

it('a phone closed with 1011 because the store is unreachable is not counted as an authentication rejected', async () => {
  db = await createDatabase();
  tp = await startToxiproxy();
  const proxy = await tp.proxy('pg', '127.0.0.1:5432');
  relay = await startTestRelay(['--database-url', proxy.through(db.url)]);
  const phone = await pairRaw(relay.url, (await relay.pair()).code);

  await proxy.setEnabled(false); // Postgres unreachable for the node: connections closed, new ones refused
  const before = (await sample('phonebridge_device_auth_total', '{outcome="rejected"}')) ?? 0;
  const errorsBefore = (await sample('phonebridge_device_auth_total', '{outcome="error"}')) ?? 0;
  const closesBefore = (await sample('phonebridge_device_closes_total', '{code="1011"}')) ?? 0;
  const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  const closed = await s.closed;
  expect(closed.code, 'the relay could not check the phone: 1011, retry').toBe(1011);
  const after = (await sample('phonebridge_device_auth_total', '{outcome="rejected"}')) ?? 0;
  const errorsAfter = (await sample('phonebridge_device_auth_total', '{outcome="error"}')) ?? 0;
  await proxy.setEnabled(true);
  expect(
    after - before,
    'phonebridge_device_auth_total{outcome="rejected"} counted a relay fault (1011, store unreachable) as a rejected phone',
  ).toBe(0);
  expect(errorsAfter - errorsBefore, 'counted as outcome="error"').toBe(1);
  // The relay's own 1011 (PhonebridgeDeviceRelayErrors reads it).
  expect(((await sample('phonebridge_device_closes_total', '{code="1011"}')) ?? 0) - closesBefore).toBe(1);
}, 90_000);
