// Test harness: a real relay (in this process or as a child), real phones (DeviceAgent over
// real WebSockets) and the official SDK client. Nothing of our own is mocked.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { parseRelayConfig } from '../../src/config.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import { startRelay, type RunningRelay } from '../../services/serve.ts';
import { createKey, createPairing, type QrPayload } from '../../src/provisioning.ts';
import { DeviceAgent, silentLogger, type McpServerLike } from '../../src/device/agent/index.ts';
import type { Scope } from '../../src/store/types.ts';
import type { HostedOptions } from '../../src/hosted/index.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';

export function tempDir(prefix = 'pb-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface TestRelay {
  relay: RunningRelay;
  url: string;
  mcpUrl: string;
  dataDir: string;
  pair(name?: string): Promise<QrPayload>;
  key(deviceId: string, scopes?: Scope[]): Promise<{ id: string; token: string }>;
  stop(): Promise<void>;
}

export async function startTestRelay(
  flags: string[] = [],
  opts: { dataDir?: string; log?: Logger; hosted?: HostedOptions } = {},
): Promise<TestRelay> {
  const dataDir = opts.dataDir ?? tempDir();
  const config = parseRelayConfig(['--port', '0', '--admin-port', '0', '--data-dir', dataDir, ...flags], {});
  const relay = await startRelay(config, opts.log ?? createLogger({ level: process.env.PB_TEST_LOG ?? 'silent' }), {
    hosted: opts.hosted,
  });
  const url = config.publicUrl;
  return {
    relay,
    url,
    mcpUrl: `${url}/mcp`,
    dataDir,
    pair: (name) => createPairing(relay.store.store, { relay: url, name }),
    key: (deviceId, scopes) => createKey(relay.store.store, deviceId, scopes),
    async stop() {
      await relay.stop();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface TestPhone {
  agent: DeviceAgent;
  deviceId: string;
  /** The pairing payload it was paired with (its code is spent). */
  qr: QrPayload;
  stateDir: string;
  stop(): Promise<void>;
}

/** Pairs a phone with the relay and waits until its socket is up and initialized. */
export async function startTestPhone(
  relay: TestRelay,
  createServer: () => McpServerLike,
  opts: { stateDir?: string; name?: string } = {},
): Promise<TestPhone> {
  const stateDir = opts.stateDir ?? tempDir('pb-phone-');
  const qr = await relay.pair(opts.name);
  const identity = await DeviceAgent.pair({ stateDir, qr, name: opts.name ?? 'test-phone', log: silentLogger });
  const agent = new DeviceAgent({ stateDir, createServer, log: silentLogger, backoff: { baseMs: 50, capMs: 500 } });
  const connected = new Promise<void>((resolve) => agent.once('connected', () => resolve()));
  agent.start();
  await connected;
  await waitFor(() => !!relay.relay.node.ctx.hub.device(identity.device_id)?.initResult);
  return {
    agent,
    deviceId: identity.device_id,
    qr,
    stateDir,
    async stop() {
      await agent.stop();
    },
  };
}

/** A relay with one echo phone paired and connected, and a key for that phone. */
export interface EchoRelay {
  relay: TestRelay;
  phone: TestPhone;
  /** A key for the phone with every scope. */
  token: string;
}

/**
 * The common set-up of the relay tests: a relay started with `flags`, an echo phone
 * (test/fixtures/echo-server.ts, recording into `control` when given) paired and initialized,
 * and a key for it. If the phone or the key fails, the relay is stopped before the error goes on.
 */
export async function startEchoRelay(
  flags: string[] = [],
  opts: { control?: EchoServerControl } = {},
): Promise<EchoRelay> {
  const relay = await startTestRelay(flags);
  let phone: TestPhone | undefined;
  try {
    phone = await startTestPhone(relay, () => createEchoServer(opts.control));
    const { token } = await relay.key(phone.deviceId);
    return { relay, phone, token };
  } catch (err) {
    await phone?.stop();
    await relay.stop();
    throw err;
  }
}

export async function connectClient(
  mcpUrl: string,
  token: string,
  opts: { protocolVersion?: string; header?: 'x-api-key' | 'bearer' } = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const headers: Record<string, string> =
    opts.header === 'bearer' ? { Authorization: `Bearer ${token}` } : { 'X-Api-Key': token };
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers } });
  if (opts.protocolVersion) {
    // The SDK client always asks for its latest revision; to speak an older one, the test
    // rewrites the initialize it sends. The relay's answer then sets the revision for real.
    const send = transport.send.bind(transport);
    const wanted = opts.protocolVersion;
    transport.send = (msg, o) => {
      if ('method' in msg && msg.method === 'initialize' && msg.params)
        msg = { ...msg, params: { ...msg.params, protocolVersion: wanted } };
      return send(msg, o);
    };
  }
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Reads an SSE response until its first progress event and returns that event's id (the stream stays open). */
export async function firstProgressEventId(res: Response): Promise<string> {
  const reader = res.body!.getReader();
  let text = '';
  for (;;) {
    const r = await reader.read();
    if (r.done) throw new Error('stream ended before a progress event');
    text += new TextDecoder().decode(r.value);
    const id = /id: (\S+)\nevent: message\ndata: .*notifications\/progress/.exec(text)?.[1];
    if (id) return id;
  }
}

/** The JSON-RPC messages in an SSE body, in order. */
export function sseMessages(text: string): any[] {
  return [...text.matchAll(/data: (\{.*\})\n/g)].map((m) => JSON.parse(m[1]));
}
