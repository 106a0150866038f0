// Shared by test/phone: real relays (in process, on a port we can reuse after a restart),
// simulated phones served by the real agent, SDK clients, and small TCP/metrics tools.
import { rmSync } from 'node:fs';
import { createServer as createNetServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { type Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { loadIdentity } from '../../src/device/agent/index.ts';
import { SimPhone } from '../../src/device/sim/model.ts';
import { createPhoneServer, type PhoneServerOptions } from '../../src/device/tools/index.ts';
import { startTestRelay, tempDir, type TestRelay } from '../helpers/relay.ts';

const scratch: string[] = [];

/** A temp dir that removeScratch() deletes (each test file calls it in afterAll). */
export function scratchDir(prefix = 'pb-phone-test-'): string {
  const dir = tempDir(prefix);
  scratch.push(dir);
  return dir;
}

export function removeScratch(): void {
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * A port that is free now. The relay binds an explicit port so that it can be restarted on
 * it: a uWS socket listening on port 0 gets no SO_REUSEADDR, so after a restart its
 * connections' TIME_WAIT entries keep the port from being bound again for a minute.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** A relay on a fixed port and data dir, so the test can stop it and start another in its place. */
export async function startRestartableRelay(
  flags: string[] = [],
): Promise<{ relay: TestRelay; port: number; dataDir: string; restart(): Promise<TestRelay> }> {
  const port = await freePort();
  const dataDir = tempDir('pb-relay-');
  const handle = {
    relay: await startTestRelay(['--port', String(port), ...flags], { dataDir }),
    port,
    dataDir,
    async restart() {
      await handle.relay.stop();
      handle.relay = await startTestRelay(['--port', String(port), ...flags], { dataDir });
      return handle.relay;
    },
  };
  return handle;
}

/** createServer for an agent: the real tool surface over one SimPhone, device id read after pairing. */
export function phoneServerFactory(
  stateDir: string,
  phone: SimPhone,
  opts: Omit<PhoneServerOptions, 'phone' | 'deviceId'> = {},
) {
  return () => createPhoneServer({ ...opts, phone, deviceId: loadIdentity(stateDir)?.device_id ?? 'unpaired' });
}

/** Calls a tool the way a model's client would; the SDK validates structuredContent (list tools first). */
export function caller(client: Client) {
  return async (name: string, args: Record<string, unknown> = {}, options?: RequestOptions): Promise<CallToolResult> =>
    (await client.callTool({ name, arguments: args }, undefined, options)) as CallToolResult;
}

/** The structured result of a success; fails loudly on an error result. */
export function ok<T = Record<string, any>>(result: CallToolResult): T {
  if (result.isError) throw new Error(`expected success, got ${JSON.stringify(result.content)}`);
  if (result.structuredContent === undefined) throw new Error('a success without structuredContent');
  return result.structuredContent as T;
}

/** The error envelope of a tool error; checks it has no structuredContent. */
export function toolError(result: CallToolResult): { code: string; message: string; [k: string]: unknown } {
  if (!result.isError) throw new Error(`expected a tool error, got ${JSON.stringify(result.structuredContent)}`);
  if (result.structuredContent !== undefined) throw new Error('an error result carried structuredContent');
  const block = result.content[0];
  if (block?.type !== 'text') throw new Error('an error result without a text block');
  return JSON.parse(block.text).error;
}

/** One labelled counter from the relay's /metrics (0 when absent). */
export async function metricValue(
  adminPort: number,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^(\w+)(?:\{([^}]*)\})? ([\d.eE+-]+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[2] ?? '').split(',');
    if (want.every((w) => have.includes(w))) total += Number(m[3]);
  }
  return total;
}

/**
 * A TCP relay between phone and relay that can freeze: while frozen it holds every
 * connection open but forwards nothing, like a NAT that silently forgot the flow.
 */
export class FreezableProxy {
  frozen = false;
  readonly connections = new Set<Socket>();
  private server: Server;

  private constructor(private readonly target: number) {
    this.server = createNetServer((client) => {
      const upstream = netConnect(this.target, '127.0.0.1');
      this.connections.add(client);
      const forward = (from: Socket, to: Socket) =>
        from.on('data', (chunk) => {
          if (!this.frozen) to.write(chunk);
        });
      forward(client, upstream);
      forward(upstream, client);
      const end = () => {
        this.connections.delete(client);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
  }

  static async start(target: number): Promise<FreezableProxy> {
    const proxy = new FreezableProxy(target);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', () => resolve()));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export { SimPhone };
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
