// The device agent against the real relay: signed upgrade, MCP over the socket, and what it does
// on each way a connection can end — every close code produced by the relay itself.
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { X509Certificate } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { once } from 'node:events';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import {
  DeviceAgent,
  runDevice,
  silentLogger,
  type DeviceAgentOptions,
  type StopInfo,
} from '../../src/device/agent/index.ts';
import { KEY_FILE, loadIdentity, saveIdentity } from '../../src/device/agent/state.ts';
import { PinMismatchError, spkiFingerprint } from '../../src/device/agent/relay-http.ts';
import { connectClient, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { selfSignedCert } from '../helpers/tls.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';
import {
  FreezableProxy,
  metricValue,
  phoneServerFactory,
  removeScratch,
  scratchDir,
  SimPhone,
  sleep,
  startRestartableRelay,
} from './helpers.ts';

let relayHandle: Awaited<ReturnType<typeof startRestartableRelay>>;
const relay = () => relayHandle.relay;
const agents: DeviceAgent[] = [];
let servers = 0;

beforeAll(async () => {
  relayHandle = await startRestartableRelay();
});
afterAll(async () => {
  await relayHandle?.relay.stop();
  rmSync(relayHandle.dataDir, { recursive: true, force: true });
  removeScratch();
});
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.stop()));
});

/** A freshly paired state dir. */
async function pairedPhone(
  name = 'agent-test',
  r: TestRelay = relay(),
): Promise<{ stateDir: string; deviceId: string }> {
  const stateDir = join(scratchDir('pb-agent-'), 'state');
  const identity = await DeviceAgent.pair({ stateDir, qr: await r.pair(name), name, log: silentLogger });
  return { stateDir, deviceId: identity.device_id };
}

/** Test timings: reconnects within tens of milliseconds. */
function agentOptions(stateDir: string, extra: Partial<DeviceAgentOptions> = {}): DeviceAgentOptions {
  const make = phoneServerFactory(stateDir, new SimPhone({ seed: 3 }));
  return {
    stateDir,
    createServer: () => {
      servers++;
      return make();
    },
    log: silentLogger,
    backoff: { baseMs: 10, dropWindowMs: 20, capMs: 50 },
    drainJitterMs: 20,
    requestTimeoutMs: 5_000,
    ...extra,
  };
}

function startAgent(stateDir: string, extra: Partial<DeviceAgentOptions> = {}): DeviceAgent {
  const agent = new DeviceAgent(agentOptions(stateDir, extra));
  agents.push(agent);
  agent.start();
  return agent;
}

/** The relay holds an initialized socket for this device. */
const online = (deviceId: string, r: TestRelay = relay()) =>
  waitFor(() => !!r.relay.node.ctx.hub.device(deviceId)?.initResult, 10_000, `device ${deviceId} online`);

/** A tool call from an SDK client through the relay: proves the socket serves MCP end to end. */
async function listDevicesThrough(deviceId: string, r: TestRelay = relay()): Promise<string> {
  const { client } = await connectClient(r.mcpUrl, (await r.key(deviceId)).token);
  try {
    await client.listTools();
    const result = await client.callTool({ name: 'list_devices', arguments: {} });
    return (result.structuredContent as { devices: { deviceId: string }[] }).devices[0].deviceId;
  } finally {
    await client.close();
  }
}

describe('DeviceAgent against the relay', () => {
  it('signs the upgrade and serves MCP; after a 1011 from the relay it reconnects with a fresh nonce and a fresh server', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    servers = 0;
    const agent = startAgent(stateDir);
    await online(deviceId);
    expect(await listDevicesThrough(deviceId)).toBe(deviceId);
    const first = relay().relay.node.ctx.hub.device(deviceId)!;

    const events: string[] = [];
    agent.on('disconnected', (e) => events.push(`disconnected ${e.code} ${e.willReconnect}`));
    agent.on('reconnecting', (e) => events.push(`reconnecting ${e.cause}`));
    first.close(1011, 'relay error');
    // A new socket on the relay: the old nonce is spent there (single use), so the agent had to sign a new one.
    await waitFor(
      () => {
        const c = relay().relay.node.ctx.hub.device(deviceId);
        return !!c && c !== first && !!c.initResult;
      },
      10_000,
      'second socket',
    );
    expect(await listDevicesThrough(deviceId)).toBe(deviceId);
    expect(events).toEqual(['disconnected 1011 true', 'reconnecting close 1011 (relay error)']);
    expect(servers).toBe(2);
    expect(agent.connected).toBe(true);
  });

  it('stops for good on 4001 when a second agent with the same identity takes over', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    const first = startAgent(stateDir);
    await online(deviceId);
    const firstConn = relay().relay.node.ctx.hub.device(deviceId)!;
    let firstConnects = 0;
    first.on('connected', () => firstConnects++);
    const stopped = once(first, 'stopped') as Promise<[StopInfo]>;

    const copy = join(scratchDir('pb-agent-copy-'), 'state');
    cpSync(stateDir, copy, { recursive: true });
    const second = startAgent(copy);
    const [info] = await stopped;
    expect(info).toMatchObject({ reason: 'superseded', code: 4001 });
    expect(info.message).toMatch(/another instance/);
    expect(await first.whenStopped()).toEqual(info);

    await sleep(300); // many backoff windows (cap 50 ms): the first must not come back and fight
    expect(firstConnects).toBe(0);
    expect(first.connected).toBe(false);
    expect(second.connected).toBe(true);
    const conn = relay().relay.node.ctx.hub.device(deviceId)!;
    expect(conn).not.toBe(firstConn);
    expect(await listDevicesThrough(deviceId)).toBe(deviceId);
  });

  it('stops for good on 4003 when its key no longer matches the pairing', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    // Another P-256 key in the state dir: the signature no longer verifies against the stored public key.
    writeFileSync(join(stateDir, KEY_FILE), generateDeviceKey().privateKeyPem, { mode: 0o600 });
    const rejectedBefore = await metricValue(relay().relay.node.adminPort, 'phonebridge_device_auth_total', {
      outcome: 'rejected',
    });
    const agent = startAgent(stateDir);
    const info = await agent.whenStopped();
    expect(info).toMatchObject({ reason: 'unauthorised', code: 4003 });
    expect(info.message).toMatch(/refused this device as unauthorised; close 4003 \(bad signature\)/);
    await sleep(300);
    expect(
      await metricValue(relay().relay.node.adminPort, 'phonebridge_device_auth_total', { outcome: 'rejected' }),
    ).toBe(rejectedBefore + 1);
    expect(relay().relay.node.ctx.hub.device(deviceId)).toBeUndefined();
  });

  it('stops on 4004 when the device is removed, remembers it, and re-pairs only with a new code', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    const agent = startAgent(stateDir);
    await online(deviceId);
    const oldKey = readFileSync(join(stateDir, KEY_FILE), 'utf8');

    expect(await relay().relay.store.store.removeDevice(deviceId)).toBe(true);
    await relay().relay.node.control({ type: 'device_removed', deviceId });
    const info = await agent.whenStopped();
    expect(info).toMatchObject({ reason: 'removed', code: 4004 });
    expect(info.message).toMatch(/removed from the relay/);
    expect(loadIdentity(stateDir)!.removed_at).toBeTruthy();
    expect(() => new DeviceAgent(agentOptions(stateDir)).start()).toThrow(/was removed from the relay/);
    await expect(runDevice({ ...agentOptions(stateDir) })).rejects.toThrow(/pair again with --pair/);

    const controller = new AbortController();
    let newId = '';
    const run = runDevice({
      ...agentOptions(stateDir),
      pair: JSON.stringify(await relay().pair()),
      name: 'again',
      signal: controller.signal,
      onAgent: (a) => a.once('connected', (e) => (newId = e.deviceId)),
    });
    await waitFor(() => newId !== '', 10_000, 're-paired connection');
    expect(newId).not.toBe(deviceId);
    expect(loadIdentity(stateDir)!.device_id).toBe(newId);
    expect(readFileSync(join(stateDir, KEY_FILE), 'utf8')).not.toBe(oldKey);
    await online(newId);
    expect(await listDevicesThrough(newId)).toBe(newId);
    controller.abort();
    expect(await run).toMatchObject({ reason: 'stopped' });
  });

  it('stops on 4004, not 4003, when its device was removed while it was not running, and remembers it', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    const first = startAgent(stateDir);
    await online(deviceId);
    await first.stop();
    await waitFor(() => !relay().relay.node.ctx.hub.device(deviceId), 5000, 'the phone gone from the relay');

    // Removed while the phone was away: nobody held its socket to close.
    expect(await relay().relay.store.store.removeDevice(deviceId)).toBe(true);
    const info = await startAgent(stateDir).whenStopped();
    expect(info).toMatchObject({ reason: 'removed', code: 4004 });
    expect(info.message).toMatch(/removed from the relay.*; close 4004 \(device removed\)/);
    expect(loadIdentity(stateDir)!.removed_at).toBeTruthy();
    expect(relay().relay.node.ctx.hub.device(deviceId)).toBeUndefined();
  });

  it('stop() closes the socket with 1000 and does not reconnect', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    const agent = startAgent(stateDir);
    await online(deviceId);
    const admin = relay().relay.node.adminPort;
    const before = await metricValue(admin, 'phonebridge_device_closes_total', { code: '1000' });
    const authBefore = await metricValue(admin, 'phonebridge_device_auth_total');
    await agent.stop();
    expect(await agent.whenStopped()).toMatchObject({ reason: 'stopped' });
    await waitFor(() => relay().relay.node.ctx.hub.device(deviceId) === undefined, 5_000, 'relay sees the close');
    expect(await metricValue(admin, 'phonebridge_device_closes_total', { code: '1000' })).toBe(before + 1);
    await sleep(200);
    expect(await metricValue(admin, 'phonebridge_device_auth_total')).toBe(authBefore); // no new attempt
  });

  it('terminates a dead path when pongs stop coming, and reconnects once the path works again', async () => {
    const proxy = await FreezableProxy.start(relayHandle.port);
    try {
      // The phone reaches the relay through the proxy; relay_host is still the relay's own.
      const stateDir = join(scratchDir('pb-agent-'), 'state');
      const qr = { ...(await relay().pair()), relay: proxy.url };
      const { device_id: deviceId } = await DeviceAgent.pair({ stateDir, qr, name: 'behind-nat', log: silentLogger });
      const agent = startAgent(stateDir, { pingIntervals: { initialMs: 100, pongTimeoutMs: 200 } });
      await online(deviceId);
      const firstConn = relay().relay.node.ctx.hub.device(deviceId)!;
      // Pongs in time make the interval grow (waited for, not slept on: a loaded machine may
      // miss one, which starts the interval short again).
      await waitFor(() => agent.pinger.intervalMs > 100, 5000, 'the ping interval growing');

      proxy.frozen = true;
      const [event] = await once(agent, 'disconnected');
      expect(event).toMatchObject({ code: 1006, willReconnect: true });
      expect(agent.pinger.intervalMs).toBe(100); // a missed pong starts the interval short again
      proxy.frozen = false;
      await waitFor(
        () => {
          const c = relay().relay.node.ctx.hub.device(deviceId);
          return !!c && c !== firstConn && !!c.initResult;
        },
        10_000,
        'reconnect through the thawed path',
      );
      expect(agent.connected).toBe(true);
    } finally {
      await Promise.all(agents.splice(0).map((a) => a.stop()));
      await proxy.close();
    }
  });

  it('refuses to start an unpaired state dir', () => {
    expect(() => new DeviceAgent(agentOptions(join(scratchDir(), 'empty'))).start()).toThrow(/not paired/);
  });

  // These two restart the relay: keep them last in the file. After a restart they check the
  // phone through the relay's own view (it initialized the new socket), not with an SDK client:
  // the stopped in-process relay keeps answering HTTP on pooled keep-alive connections (its
  // node.close() never closes the uWS app), so a client's pooled fetch could reach the dead one.
  it('gives up after repeated HTTP 401/403 refusals of its upgrade (a proxy in front of the relay), saying why', async () => {
    // Our relay always upgrades and closes with 4003; an ingress or auth proxy in front of it
    // refuses with an HTTP status instead. Plain node:http stands in for that proxy.
    const { stateDir } = await pairedPhone('behind-a-proxy');
    const seen: string[] = [];
    const proxy: Server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url === '/device/challenge')
        return void res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ nonce: 'n'.repeat(43) }));
      res.writeHead(403, { 'content-type': 'application/json' }).end('{"error":"forbidden"}');
    });
    proxy.on('upgrade', (req, socket) => {
      seen.push(`UPGRADE ${req.url}`);
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    try {
      saveIdentity(stateDir, {
        ...loadIdentity(stateDir)!,
        relay: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      });
      const agent = startAgent(stateDir, { maxAuthRejections: 3 });
      const info = await agent.whenStopped();
      expect(info).toMatchObject({ reason: 'unauthorised', code: 403 });
      expect(info.message).toMatch(/rejected this device's signature 3 times in a row \(HTTP 403\)/);
      expect(seen.filter((s) => s.startsWith('UPGRADE'))).toHaveLength(3);
      await sleep(200);
      expect(seen.filter((s) => s.startsWith('UPGRADE'))).toHaveLength(3); // stopped for good
    } finally {
      await new Promise((r) => proxy.close(r));
    }
  });

  it('comes back promptly after 1012 (relay draining), using the drain jitter and not the backoff', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    // random 0.5: the drain jitter gives 0.5 × 100 = 50 ms; the backoff would give 0.5 × 1 000 = 500 ms.
    const agent = startAgent(stateDir, {
      drainJitterMs: 100,
      backoff: { random: () => 0.5, baseMs: 1_000, dropWindowMs: 1_000, capMs: 1_000 },
    });
    await online(deviceId);
    const delays: number[] = [];
    const causes: string[] = [];
    agent.on('reconnecting', (e) => {
      delays.push(e.delayMs);
      causes.push(e.cause);
    });
    await relay().relay.node.drain();
    await waitFor(() => delays.length > 0, 5_000, 'reconnect scheduled');
    expect(causes[0]).toBe('close 1012 (relay restarting; reconnect)');
    expect(delays[0]).toBe(50);
    // The drained node is gone; a new one comes up on the same port and data dir.
    await relayHandle.restart();
    await online(deviceId);
    expect(delays.slice(1).every((d) => d === 500)).toBe(true); // attempts against the closed port: the backoff
  });

  it('survives the relay being stopped and restarted on the same port and data dir', async () => {
    const { stateDir, deviceId } = await pairedPhone();
    const agent = startAgent(stateDir);
    await online(deviceId);
    let disconnects = 0;
    agent.on('disconnected', () => disconnects++);
    await relayHandle.restart();
    await online(deviceId);
    expect(disconnects).toBe(1);
    expect(agent.connected).toBe(true);
  });
});

// A self-signed relay (uWS SSLApp): the QR's fp is what makes it trusted; a wrong fp is refused
// before any request; without a pin the certificate is not trusted at all.
const haveOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

// Skipped only where the openssl CLI is missing: it makes the self-signed certificate.
describe.skipIf(!haveOpenssl)('TLS pinning against a relay serving https', () => {
  let tlsRelay: TestRelay;
  let fp: string;

  beforeAll(async () => {
    const dir = scratchDir('pb-tls-');
    const { cert, key } = selfSignedCert(dir, 'relay', 'relay.test');
    fp = spkiFingerprint(new X509Certificate(readFileSync(cert)).raw);
    tlsRelay = await startTestRelay(['--tls-cert', cert, '--tls-key', key]);
  });
  afterAll(async () => {
    await tlsRelay?.stop();
  });

  it('serves https and publishes the pin the phone computes', () => {
    expect(tlsRelay.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(tlsRelay.relay.node.fingerprint).toBe(fp);
  });

  it('pairs and connects over wss when the pin matches', async () => {
    const stateDir = join(scratchDir('pb-agent-'), 'state');
    const identity = await DeviceAgent.pair({
      stateDir,
      qr: { ...(await tlsRelay.pair('pinned')), fp },
      name: 'pinned',
      log: silentLogger,
    });
    expect(loadIdentity(stateDir)!.fp).toBe(fp);
    startAgent(stateDir);
    // The relay initialized the phone over the TLS socket: MCP flows both ways through the pin.
    await online(identity.device_id, tlsRelay);
    expect(tlsRelay.relay.node.ctx.hub.device(identity.device_id)!.initResult).toMatchObject({
      serverInfo: { name: 'phonebridge-phone' },
    });
  });

  it('refuses a relay whose key does not match, before sending the code', async () => {
    const stateDir = join(scratchDir('pb-agent-'), 'state');
    const qr = await tlsRelay.pair('wrong-pin');
    await expect(
      DeviceAgent.pair({ stateDir, qr: { ...qr, fp: 'sha256:' + '00'.repeat(32) }, name: 'x', log: silentLogger }),
    ).rejects.toBeInstanceOf(PinMismatchError);
    // The code was never sent: it still pairs (it is single use) with the right pin.
    const identity = await DeviceAgent.pair({
      stateDir: join(scratchDir('pb-agent-'), 'state'),
      qr: { ...qr, fp },
      name: 'x',
      log: silentLogger,
    });
    expect(await tlsRelay.relay.store.store.getDevice(identity.device_id)).toBeTruthy();
  });

  it('an enrollment code made through /api/v1 carries the pin, and a phone pairs with its QR as given', async () => {
    const { token } = await createFleetKey(tlsRelay.relay.store.store, { accountId: 'local', scopes: [...SCOPES] });
    const body = JSON.stringify({ max_phones: 2, expires_s: 600 });
    const created = await new Promise<{ status: number; json: any }>((resolve, reject) => {
      const req = httpsRequest(
        `${tlsRelay.url}/api/v1/enrollments`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': token },
          rejectUnauthorized: false, // this test's own call; the phone below trusts only the pin
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(created.status).toBe(201);
    expect(created.json.qr).toEqual({ v: 1, relay: tlsRelay.url, code: created.json.code, fp });
    const identity = await DeviceAgent.pair({
      stateDir: join(scratchDir('pb-agent-'), 'state'),
      qr: JSON.stringify(created.json.qr),
      name: 'enrolled',
      log: silentLogger,
    });
    expect(await tlsRelay.relay.store.store.getDevice(identity.device_id)).toBeTruthy();
  });

  it('without a pin, a self-signed relay is not trusted', async () => {
    const stateDir = join(scratchDir('pb-agent-'), 'state');
    await expect(
      DeviceAgent.pair({ stateDir, qr: await tlsRelay.pair(), name: 'x', log: silentLogger }),
    ).rejects.toThrow(/self[- ]signed certificate/);
  });
});
