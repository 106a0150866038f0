import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DeviceAgent, runDevice, silentLogger, type DeviceAgentOptions, type StopInfo } from './agent.ts';
import { PinMismatchError, spkiFingerprint } from './relay-http.ts';
import { KEY_FILE, loadIdentity } from './state.ts';
import { TestRelay } from './test-relay.ts';

let root: string;
let stateDir: string;
let relay: TestRelay;
let servers: number;
const agents: DeviceAgent[] = [];

function createServer(): McpServer {
  servers++;
  const server = new McpServer({ name: 'test-phone', version: '0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server;
}

/** Test timings: reconnects within tens of milliseconds. */
function agentOptions(extra: Partial<DeviceAgentOptions> = {}): DeviceAgentOptions {
  return { stateDir, createServer, log: silentLogger, backoff: { baseMs: 10, dropWindowMs: 20, capMs: 50 }, drainJitterMs: 20, requestTimeoutMs: 2_000, ...extra };
}

function startAgent(extra: Partial<DeviceAgentOptions> = {}): DeviceAgent {
  const agent = new DeviceAgent(agentOptions(extra));
  agents.push(agent);
  agent.start();
  return agent;
}

async function echoThrough(ws: Parameters<TestRelay['initialize']>[0], text: string): Promise<string> {
  const client = await relay.initialize(ws);
  const result = await client.callTool({ name: 'echo', arguments: { text } });
  return (result.content as { text: string }[])[0]!.text;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeEach(async () => {
  servers = 0;
  root = mkdtempSync(join(tmpdir(), 'pb-agent-'));
  stateDir = join(root, 'state');
  relay = await new TestRelay().listen();
  await DeviceAgent.pair({ stateDir, qr: relay.qr(), name: 'test-phone' });
});

afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.stop()));
  await relay.close();
  rmSync(root, { recursive: true, force: true });
});

describe('DeviceAgent', () => {
  it('signs the upgrade, serves MCP, and reconnects with a fresh nonce and server after 1011', async () => {
    const first = relay.nextDevice();
    const agent = startAgent();
    const ws1 = await first;
    expect(await echoThrough(ws1, 'one')).toBe('one');

    const events: string[] = [];
    agent.on('disconnected', (e) => events.push(`disconnected ${e.code} ${e.willReconnect}`));
    agent.on('reconnecting', (e) => events.push(`reconnecting ${e.cause}`));
    const second = relay.nextDevice();
    ws1.close(1011, 'relay error');
    const ws2 = await second;
    expect(await echoThrough(ws2, 'two')).toBe('two');
    expect(events).toEqual(['disconnected 1011 true', 'reconnecting close 1011 (relay error)']);
    expect(servers).toBe(2);

    expect(relay.upgrades.map((u) => u.refused)).toEqual([undefined, undefined]);
    const [h1, h2] = relay.upgrades.map((u) => u.headers);
    expect(h1!['X-Device-Id']).toBe(loadIdentity(stateDir)!.device_id);
    expect(h1!['X-Device-App']).toBe('phonebridge-agent/0.1.0');
    expect(h1!['X-Device-Ts']).toMatch(/^\d{10}$/);
    expect(h1!['X-Device-Nonce']).not.toBe(h2!['X-Device-Nonce']);
    expect(agent.connected).toBe(true);
  });

  it.each([
    [4001, 'superseded', /another instance/],
    [4003, 'unauthorised', /unauthorised/],
    [4004, 'removed', /removed from the relay/],
  ])('stops for good on close %i (%s)', async (code, reason, explain) => {
    const first = relay.nextDevice();
    const agent = startAgent();
    const ws = await first;
    await relay.initialize(ws);
    const stopped = once(agent, 'stopped') as Promise<[StopInfo]>;
    ws.close(code, 'bye');
    const [info] = await stopped;
    expect(info).toMatchObject({ reason, code });
    expect(info.message).toMatch(explain);
    expect(await agent.whenStopped()).toEqual(info);
    await sleep(200); // several backoff windows: no second attempt
    expect(relay.upgrades).toHaveLength(1);
    expect(agent.connected).toBe(false);
  });

  it('after 4004 remembers the pairing is gone, and re-pairs only with a new code', async () => {
    const first = relay.nextDevice();
    const agent = startAgent();
    (await first).close(4004, 'device removed');
    await agent.whenStopped();
    const removed = loadIdentity(stateDir)!;
    expect(removed.removed_at).toBeTruthy();
    expect(() => new DeviceAgent(agentOptions()).start()).toThrow(/was removed from the relay/);
    await expect(runDevice({ stateDir, createServer, log: silentLogger })).rejects.toThrow(/pair again with --pair/);

    const oldKey = readFileSync(join(stateDir, KEY_FILE), 'utf8');
    const controller = new AbortController();
    const connected = relay.nextDevice();
    const run = runDevice({ ...agentOptions(), pair: relay.qr(), name: 'again', signal: controller.signal });
    await connected;
    expect(loadIdentity(stateDir)!.device_id).not.toBe(removed.device_id);
    expect(readFileSync(join(stateDir, KEY_FILE), 'utf8')).not.toBe(oldKey);
    controller.abort();
    expect(await run).toMatchObject({ reason: 'stopped' });
  });

  it('comes back promptly after 1012 (relay draining)', async () => {
    const first = relay.nextDevice();
    const agent = startAgent({ drainJitterMs: 30, backoff: { baseMs: 10_000, dropWindowMs: 10_000 } });
    const ws = await first;
    const delays: number[] = [];
    agent.on('reconnecting', (e) => delays.push(e.delayMs));
    const second = relay.nextDevice();
    ws.close(1012, 'draining');
    await second;
    expect(delays).toHaveLength(1);
    expect(delays[0]).toBeLessThan(30); // the drain jitter, not the 10 s backoff
  });

  it('survives the relay being killed and restarted on the same port', async () => {
    const first = relay.nextDevice();
    const agent = startAgent();
    await first;
    const port = relay.port;
    const devices = relay.devices;
    await relay.close();
    await sleep(100); // a few failed attempts against a closed port
    relay = new TestRelay();
    for (const [id, d] of devices) relay.devices.set(id, d);
    const back = relay.nextDevice();
    await relay.listen(port);
    expect(await echoThrough(await back, 'back')).toBe('back');
    expect(agent.connected).toBe(true);
  });

  it('gives up after repeated 401s on the upgrade, saying why', async () => {
    relay.refuseUpgrades = 401;
    const agent = startAgent({ maxAuthRejections: 3 });
    const info = await agent.whenStopped();
    expect(info).toMatchObject({ reason: 'unauthorised', code: 401 });
    expect(info.message).toMatch(/rejected this device's signature 3 times/);
    expect(relay.upgrades).toHaveLength(3);
  });

  it('terminates and reconnects when pongs stop coming', async () => {
    await relay.close();
    relay = new TestRelay({ autoPong: false });
    await relay.listen();
    rmSync(stateDir, { recursive: true });
    await DeviceAgent.pair({ stateDir, qr: relay.qr(), name: 'p' });
    const first = relay.nextDevice();
    const agent = startAgent({ pingIntervals: { initialMs: 30, pongTimeoutMs: 30 } });
    await first;
    const [event] = await once(agent, 'disconnected');
    expect(event).toMatchObject({ code: 1006, willReconnect: true });
    expect(agent.pinger.intervalMs).toBe(30);
  });

  it('stop() closes the socket with 1000 and does not reconnect', async () => {
    const first = relay.nextDevice();
    const agent = startAgent();
    const ws = await first;
    await once(agent, 'connected');
    const closed = once(ws, 'close');
    await agent.stop();
    expect((await closed)[0]).toBe(1000);
    expect(await agent.whenStopped()).toMatchObject({ reason: 'stopped' });
    await sleep(100);
    expect(relay.upgrades).toHaveLength(1);
  });

  it('refuses to start an unpaired state dir', () => {
    expect(() => new DeviceAgent({ ...agentOptions(), stateDir: join(root, 'empty') }).start()).toThrow(/not paired/);
  });
});

// A self-signed relay: the QR's fp is what makes it trusted; a wrong fp is refused before any request.
const haveOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!haveOpenssl)('TLS pinning', () => {
  let tls: { key: string; cert: string };
  let fp: string;

  beforeEach(async () => {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=relay.test',
      '-keyout', join(root, 'key.pem'), '-out', join(root, 'cert.pem')], { stdio: 'ignore' });
    tls = { key: readFileSync(join(root, 'key.pem'), 'utf8'), cert: readFileSync(join(root, 'cert.pem'), 'utf8') };
    fp = spkiFingerprint(new X509Certificate(tls.cert).raw);
    await relay.close();
    relay = await new TestRelay({ tls }).listen();
    rmSync(stateDir, { recursive: true });
  });

  it('pairs and connects over wss when the pin matches', async () => {
    await DeviceAgent.pair({ stateDir, qr: relay.qr(fp), name: 'pinned' });
    expect(loadIdentity(stateDir)!.fp).toBe(fp);
    const first = relay.nextDevice();
    startAgent();
    expect(await echoThrough(await first, 'over tls')).toBe('over tls');
  });

  it('refuses a relay whose key does not match, before sending the code', async () => {
    const qr = relay.qr('sha256:' + '00'.repeat(32));
    const code = JSON.parse(qr).code;
    await expect(DeviceAgent.pair({ stateDir, qr, name: 'x' })).rejects.toBeInstanceOf(PinMismatchError);
    expect(relay.codes.has(code)).toBe(true);
  });

  it('without a pin, a self-signed relay is not trusted', async () => {
    await expect(DeviceAgent.pair({ stateDir, qr: relay.qr(), name: 'x' })).rejects.toThrow();
  });
});
