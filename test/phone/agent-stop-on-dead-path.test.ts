// DeviceAgent.stop() (and so `phonebridge device run` on SIGTERM/Ctrl-C) resolves promptly when the
// path to the relay is dead (a NAT that forgot the flow, a relay that froze): stop() calls
// socket.close(1000) and awaits the loop, which waits for the socket's 'close' event; with no close
// frame coming back, ws alone would give up only after 30 s, so stop() drops the socket after a
// short grace (src/device/agent/agent.ts, STOP_CLOSE_GRACE_MS).
//
// Promises checked:
// - src/device/agent/agent.ts, DeviceAgent.stop(): "Closes the socket (1000) and ends the loop;
//   resolves once stopped." — and the same repo's transport, src/device/agent/ws-transport.ts
//   close(): "don't wait for the closing handshake; onclose must follow close()".
// - docs/OPERATIONS.md "Half-open phone": the phone's side is what ends a dead path; a phone
//   being stopped on such a path must not sit on it for another 30 s.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { FreezableProxy, phoneServerFactory, removeScratch, scratchDir, SimPhone } from './helpers.ts';

let relay: TestRelay;
let proxy: FreezableProxy;

beforeAll(async () => {
  relay = await startTestRelay();
  proxy = await FreezableProxy.start(Number(new URL(relay.url).port));
}, 60_000);
afterAll(async () => {
  await proxy?.close();
  await relay?.stop();
  removeScratch();
});

it('stop() on a frozen path resolves promptly instead of waiting 30 s for a close frame', async () => {
  const stateDir = join(scratchDir('pb-review-stop-'), 'state');
  const qr = { ...(await relay.pair('frozen')), relay: proxy.url };
  const { device_id } = await DeviceAgent.pair({ stateDir, qr, name: 'frozen', log: silentLogger });
  const agent = new DeviceAgent({
    stateDir,
    createServer: phoneServerFactory(stateDir, new SimPhone({ seed: 3 })),
    log: silentLogger,
  });
  agent.start();
  await waitFor(() => !!relay.relay.node.ctx.hub.device(device_id)?.initResult, 20_000, 'phone connected');

  proxy.frozen = true; // the path is dead from now on; nothing comes back
  const t0 = Date.now();
  const stopped = agent.stop().then(() => Date.now() - t0);
  const within = await Promise.race([stopped, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 5_000))]);
  expect(within, 'agent.stop() still pending 5 s after it was called').not.toBe('hung');
  await stopped; // let it finish before the relay stops
  rmSync(stateDir, { recursive: true, force: true });
}, 60_000);
