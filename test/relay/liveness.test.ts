// The 25-minute silence rule (scaled down) and cancelling a long wait_for_events on the
// simulated phone: the phone itself sees the cancellation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startTestPhone,
  startTestRelay,
  connectClient,
  waitFor,
  type TestPhone,
  type TestRelay,
} from '../helpers/relay.ts';
import { challenge, completeHandshake, openSocket, pairRaw, signedHeaders } from '../helpers/raw-device.ts';
import { SimPhone } from '../../src/device/sim/model.ts';
import { createPhoneServer } from '../../src/device/tools/index.ts';

let relay: TestRelay;
let phone: TestPhone;
let sim: SimPhone;
let token: string;

beforeAll(async () => {
  relay = await startTestRelay();
  sim = new SimPhone({ seed: 7 });
  phone = await startTestPhone(relay, () => createPhoneServer({ phone: sim, deviceId: 'sim' }));
  token = (await relay.key(phone.deviceId)).token;
});
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
});

describe('idle phones', () => {
  it('closes a silent socket (1001) and keeps one whose pings count as traffic', async () => {
    const relay = await startTestRelay(['--device-idle-ms', '1500']);
    const silent = await pairRaw(relay.url, (await relay.pair()).code);
    const pinging = await pairRaw(relay.url, (await relay.pair()).code);
    const a = await openSocket(relay.url, signedHeaders(silent, await challenge(relay.url, silent.deviceId)));
    await completeHandshake(a);
    const b = await openSocket(relay.url, signedHeaders(pinging, await challenge(relay.url, pinging.deviceId)));
    await completeHandshake(b);
    const pinger = setInterval(() => b.ws.ping(), 300);
    try {
      const closed = await a.closed;
      expect(closed.code).toBe(1001);
      // The pinging phone outlived the silent one by more than its idle limit.
      await new Promise((r) => setTimeout(r, 2000));
      expect(b.ws.readyState).toBe(b.ws.OPEN);
      expect(relay.relay.node.ctx.hub.device(pinging.deviceId)).toBeTruthy();
    } finally {
      clearInterval(pinger);
      b.ws.close();
      await b.closed;
      await relay.stop();
    }
  });
});

describe('cancellation', () => {
  it('a client cancelling a long wait_for_events: the phone stops waiting', async () => {
    const { client } = await connectClient(relay.mcpUrl, token);
    await client.listTools();
    const before = sim.listenerCount;
    const ac = new AbortController();
    const call = client
      .callTool({ name: 'wait_for_events', arguments: { timeout_s: 120 } }, undefined, {
        signal: ac.signal,
        timeout: 200_000,
      })
      .catch((e) => e);
    await waitFor(() => sim.listenerCount === before + 1, 5000, 'the phone is waiting');
    ac.abort('user gave up');
    await call;
    // The SDK sent notifications/cancelled; the relay mapped it to its id; the phone unsubscribed.
    await waitFor(() => sim.listenerCount === before, 5000, 'the phone stopped waiting');
    expect(relay.relay.node.ctx.hub.device(phone.deviceId)!.inFlight).toBe(0);
    await client.close();
  });
});
