// A phone whose network vanishes without a FIN: its WebSocket to node A goes through Toxiproxy,
// and a `timeout` toxic (timeout 0) swallows every byte both ways without closing anything, as
// a phone that lost its radio or a NAT that forgot it. The relay cannot tell until the phone's
// silence limit (--device-idle-ms; 25 min in production, 4 s here). Meanwhile a call to the
// phone must end within its deadline (`timeout`), never hang, and once the silence limit closes
// the socket calls get `device_offline` at once. When the phone comes back on a new socket
// (here: a second agent of the same state dir, straight to A, as after a network change), the
// half-open one is superseded: calls reach the phone again at once, a call that was waiting on
// the old socket ends then, and nothing is left behind. Clients: official SDK, one on A, one on B.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { loadIdentity, saveIdentity } from '../../src/device/agent/state.ts';
import { startTestCluster, waitFor, type ClusterPhone, type TestCluster } from '../cluster/harness.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { startToxiproxy, type Proxy, type Toxiproxy } from '../helpers/toxiproxy.ts';
import { classify, sdkClient, type SdkClient } from './sdk-load.ts';

const DEADLINE_MS = 3000;
const IDLE_MS = 4000;
let tp: Toxiproxy;
let tc: TestCluster;

beforeAll(async () => {
  tp = await startToxiproxy();
  tc = await startTestCluster({
    nodes: 2,
    serveArgs: ['--request-timeout-ms', String(DEADLINE_MS), '--device-idle-ms', String(IDLE_MS)],
  });
}, 60_000);
afterAll(async () => {
  await tc?.stop();
  await tp?.stop();
}, 30_000);

async function call(c: SdkClient, text: string): Promise<{ outcome: string; ms: number }> {
  const started = Date.now();
  const outcome = await c.client.callTool({ name: 'echo', arguments: { text } }, undefined, { timeout: 20_000 }).then(
    (r) => ((r.content as Array<{ text?: string }>)[0]?.text === text ? 'ok' : 'wrong_answer'),
    (err: unknown) => classify(err),
  );
  return { outcome, ms: Date.now() - started };
}

async function devicesConnected(adminPort: number): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const m = /^phonebridge_devices_connected (\d+)$/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** A phone on node A through its own proxy, and SDK clients on A and B. */
async function setup(
  name: string,
): Promise<{ proxy: Proxy; phone: ClusterPhone; local: SdkClient; remote: SdkClient }> {
  const [A, B] = tc.nodes;
  const proxy = await tp.proxy(name, `127.0.0.1:${A.port}`);
  const phone = await tc.phone({ node: A, relay: `http://127.0.0.1:${proxy.port}`, name });
  const token = await tc.key(phone.deviceId);
  const local = await sdkClient('local', A.url, token);
  const remote = await sdkClient('remote', B.url, token);
  for (const c of [local, remote]) expect((await call(c, 'warm')).outcome).toBe('ok');
  return { proxy, phone, local, remote };
}

/** The same phone (state dir) on a new socket straight to A: its network came back another way. */
function comeBack(phone: ClusterPhone): DeviceAgent {
  const identity = loadIdentity(phone.stateDir)!;
  saveIdentity(phone.stateDir, { ...identity, relay: tc.nodes[0].url });
  const agent = new DeviceAgent({
    stateDir: phone.stateDir,
    createServer: () => createEchoServer(phone.control),
    log: silentLogger,
    backoff: { baseMs: 50, capMs: 500 },
  });
  agent.start();
  return agent;
}

describe('a phone whose network vanishes without a FIN', () => {
  it('calls end with timeout within their deadline, device_offline at once after the silence limit, then the phone is back on a new socket', async () => {
    const { proxy, phone, local, remote } = await setup('half-open-idle');
    const A = tc.nodes[0];
    const before = await devicesConnected(A.adminPort);
    const vanishedAt = Date.now();
    await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'downstream' });
    await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'upstream' });

    // While the socket looks alive: the frame goes out, no answer comes, the deadline ends it.
    const [l, r] = await Promise.all([call(local, 'into the void'), call(remote, 'into the void too')]);
    console.log(`half-open: local ${l.outcome} after ${l.ms} ms, remote ${r.outcome} after ${r.ms} ms`);
    for (const x of [l, r]) {
      expect(x.outcome).toBe('timeout');
      expect(x.ms).toBeLessThan(DEADLINE_MS + 1500);
    }

    // The silence limit: the relay closes the socket itself (1001) and the phone is offline.
    await waitFor(async () => (await devicesConnected(A.adminPort)) === before! - 1, IDLE_MS + 4000, 'socket closed');
    const closedAfterMs = Date.now() - vanishedAt;
    const off = await call(remote, 'offline now');
    console.log(
      `half-open: socket closed by the relay ${closedAfterMs} ms after the network vanished; then remote ${off.outcome} in ${off.ms} ms`,
    );
    expect(closedAfterMs).toBeLessThan(IDLE_MS + 2500);
    expect(off.outcome).toBe('device_offline');
    expect(off.ms).toBeLessThan(1000);

    // Back on a new socket: calls reach it again.
    // The old instance, still stuck behind the toxic, stops once the proxy lets its close through.
    const stopping = phone.agent.stop().catch(() => {});
    const backAt = Date.now();
    const agent2 = comeBack(phone);
    try {
      await waitFor(async () => (await call(remote, 'back')).outcome === 'ok', 10_000, 'the phone back');
      console.log(
        `half-open: phone back on a new socket, remote call ok ${Date.now() - backAt} ms after it reconnected`,
      );
      expect((await call(local, 'back here too')).outcome).toBe('ok');
    } finally {
      await proxy.clear();
      await stopping;
      await agent2.stop();
      await Promise.all([local.close(), remote.close()]);
    }
  }, 45_000);

  it('a new socket before the silence limit supersedes the half-open one: a call waiting on it ends at once with superseded, new calls reach the phone', async () => {
    const { proxy, phone, local, remote } = await setup('half-open-supersede');
    const A = tc.nodes[0];
    await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'downstream' });
    await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'upstream' });
    const waiting = call(remote, 'stuck on the old socket');
    await new Promise((r) => setTimeout(r, 500));
    const newAt = Date.now();
    const agent2 = comeBack(phone);
    try {
      const w = await waiting;
      const endedAfterNew = Date.now() - newAt;
      await waitFor(async () => (await call(remote, 'new socket')).outcome === 'ok', 10_000, 'calls on the new socket');
      const okAfterMs = Date.now() - newAt;
      console.log(
        `supersede: the waiting call ended ${w.outcome} after ${w.ms} ms (${endedAfterNew} ms after the new socket); calls ok ${okAfterMs} ms after it`,
      );
      expect(w.outcome).toBe('superseded'); // docs/PROTOCOL.md: requests on the old socket fail with it
      expect(w.ms).toBeLessThan(DEADLINE_MS + 1500);
      expect((await call(local, 'local too')).outcome).toBe('ok');
      // One socket for the phone on A: the half-open one is gone, not counted twice.
      expect(await devicesConnected(A.adminPort)).toBe(1);
      expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);
    } finally {
      const stopping = phone.agent.stop().catch(() => {});
      await proxy.clear();
      await stopping;
      await agent2.stop();
      await Promise.all([local.close(), remote.close()]);
    }
  }, 45_000);
});
