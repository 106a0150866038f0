// A light simulated phone, written from the protocol: challenge, signed upgrade, then it
// answers initialize, tools/list (the reference phone's real catalog, or any other) and ping,
// and hands tools/call to the scenario. Thousands fit in one process: the catalog frames are
// shared, one P-256 key serves every phone (the relay verifies each signature all the same).
import { request as httpRequest, Agent as HttpAgent } from 'node:http';
import { request as httpsRequest, type Agent as HttpsAgent } from 'node:https';
import type { KeyObject } from 'node:crypto';
import WebSocket from 'ws';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { decodeNonce, signDevicePayload, signedPayload } from '../../src/crypto/device-auth.ts';
import { SimPhone } from '../../src/device/sim/model.ts';
import { createPhoneServer } from '../../src/device/tools/index.ts';

/** What a phone says to initialize and tools/list. */
export interface Surface {
  initResult: Record<string, unknown>;
  toolsResult: { tools: unknown[] };
  /** Bytes of the tools/list result's JSON (for reports). */
  catalogBytes: number;
}

/** The reference phone's surface (createPhoneServer), asked over the SDK once. */
export async function referenceSurface(): Promise<Surface> {
  const server = createPhoneServer({ phone: new SimPhone({ seed: 1 }), deviceId: 'dev_reference' });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(b);
  const client = new Client({ name: 'loadtest', version: '0' });
  await client.connect(a);
  const tools = await client.listTools();
  const initResult = {
    protocolVersion: '2025-11-25',
    capabilities: client.getServerCapabilities() ?? { tools: {} },
    serverInfo: client.getServerVersion() ?? { name: 'phone', version: '0' },
    instructions: client.getInstructions(),
  };
  await client.close();
  await server.close();
  const toolsResult = { tools: tools.tools };
  return { initResult, toolsResult, catalogBytes: Buffer.byteLength(JSON.stringify(toolsResult)) };
}

/** A one-tool surface (the `echo` the scenarios call), scope devices:act. */
export function loadSurface(): Surface {
  const toolsResult = {
    tools: [
      {
        name: 'echo',
        description: 'load-test tool',
        inputSchema: { type: 'object', additionalProperties: true },
        _meta: { 'phonebridge/scope': 'devices:act' },
      },
      {
        name: 'wait_for_events',
        description: 'long poll',
        inputSchema: { type: 'object', additionalProperties: true },
        _meta: { 'phonebridge/scope': 'devices:read' },
      },
    ],
  };
  return {
    initResult: {
      protocolVersion: '2025-11-25',
      capabilities: { tools: { listChanged: true } },
      serverInfo: { name: 'light-phone', version: '1' },
    },
    toolsResult,
    catalogBytes: Buffer.byteLength(JSON.stringify(toolsResult)),
  };
}

export interface CallContext {
  phone: LightPhone;
  id: number | string;
  name: string;
  args: Record<string, unknown>;
  /** Bytes of the request frame as the phone received it. */
  frameBytes: number;
  /** Sends the JSON-RPC result in the MCP SDK's member order (or, with `raw`, an exact frame the scenario built). */
  reply(result: unknown): boolean;
  replyRaw(frame: string): boolean;
}

export interface LightPhoneOptions {
  deviceId: string;
  /**
   * The relay (node) this phone connects to and the host it signs (the relay checks it against
   * its own public host, src/gateway/device-socket.ts); an object
   * shared by many phones, so a scenario can re-point them all at once.
   */
  endpoint: { url: string; host: string };
  key: KeyObject;
  surface: Surface;
  localAddress?: string;
  /** A keep-alive agent for the challenge POSTs (one per source address is plenty). */
  agent?: HttpAgent | HttpsAgent;
  onCall?(call: CallContext): void;
  onCancelled?(phone: LightPhone, requestId: unknown): void;
  onClose?(phone: LightPhone, code: number): void;
  /** Timeout of the challenge and the upgrade. Default 20 s. */
  timeoutMs?: number;
  /**
   * When the relay drops the socket (not when we close it): the delay before attempt n
   * (1, 2, …) to reconnect; undefined: stay down. Attempts stop after 500 or on `stop`.
   */
  reconnectDelayMs?(attempt: number): number;
  onReconnected?(phone: LightPhone, at: number): void;
}

export class ConnectError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

function post(
  url: string,
  body: string,
  agent: HttpAgent | HttpsAgent | undefined,
  localAddress: string | undefined,
  timeoutMs: number,
): Promise<{ status: number; text: string }> {
  const u = new URL(url);
  const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(u, {
      method: 'POST',
      agent,
      localAddress: agent ? undefined : localAddress,
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      timeout: timeoutMs,
    });
    req.on('timeout', () => req.destroy(new Error('challenge timed out')));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(body);
  });
}

export class LightPhone {
  ws?: WebSocket;
  /** Resolves when the relay has asked for tools/list (initialize is done by then). */
  ready = false;
  connects = 0;
  readonly closes: number[] = [];
  private readonly initFrames: { init: string; tools: string };
  private retiring = false;
  private retryTimer?: NodeJS.Timeout;

  constructor(readonly opts: LightPhoneOptions) {
    // The JSON of the two fixed answers, with the id spliced in per request.
    this.initFrames = surfaceFrames(opts.surface);
  }

  get deviceId(): string {
    return this.opts.deviceId;
  }

  get open(): boolean {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  /** One connection attempt: resolves once the relay has the catalog (or rejects). */
  async connect(): Promise<void> {
    const o = this.opts;
    const timeoutMs = o.timeoutMs ?? 20_000;
    const c = await post(
      `${o.endpoint.url}/device/challenge`,
      JSON.stringify({ device_id: o.deviceId }),
      o.agent,
      o.localAddress,
      timeoutMs,
    );
    if (c.status !== 200) throw new ConnectError(`challenge: ${c.status} ${c.text.slice(0, 120)}`, c.status);
    const nonce = (JSON.parse(c.text) as { nonce: string }).nonce;
    const ts = String(Math.floor(Date.now() / 1000));
    const sig = signDevicePayload(o.key, signedPayload(decodeNonce(nonce)!, o.endpoint.host, ts));
    await new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`${o.endpoint.url.replace(/^http/, 'ws')}/device/ws`, {
        headers: {
          'X-Device-Id': o.deviceId,
          'X-Device-Nonce': nonce,
          'X-Device-Ts': ts,
          'X-Device-Sig': sig,
          'X-Device-App': 'loadtest-light/1',
        },
        localAddress: o.localAddress,
        maxPayload: 1024 * 1024,
        perMessageDeflate: false,
        handshakeTimeout: timeoutMs,
      });
      this.ws = ws;
      let settled = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        if (err) reject(err);
        else resolve();
      };
      ws.on('unexpected-response', (_req, res) => {
        settle(new ConnectError(`upgrade refused: ${res.statusCode}`, res.statusCode));
        ws.terminate();
      });
      ws.on('error', (err) => settle(err));
      ws.on('close', (code) => {
        const wasReady = this.ready;
        this.ready = false;
        this.closes.push(code);
        settle(new ConnectError(`closed before ready: ${code}`));
        o.onClose?.(this, code);
        if (wasReady && !this.retiring && o.reconnectDelayMs) this.reconnect(1);
      });
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        const text = (data as Buffer).toString();
        let f: { id?: number | string; method?: string; params?: Record<string, unknown> };
        try {
          f = JSON.parse(text);
        } catch {
          return;
        }
        if (f.method === 'initialize' && f.id !== undefined) ws.send(withId(this.initFrames.init, f.id));
        else if (f.method === 'tools/list' && f.id !== undefined) {
          ws.send(withId(this.initFrames.tools, f.id));
          this.ready = true;
          this.connects++;
          settle();
        } else if (f.method === 'ping' && f.id !== undefined)
          ws.send(withId('{"result":{},"jsonrpc":"2.0","id":@ID@}', f.id));
        else if (f.method === 'tools/call' && f.id !== undefined) {
          const id = f.id;
          const p = f.params ?? {};
          const call: CallContext = {
            phone: this,
            id,
            name: String(p.name),
            args: (p.arguments as Record<string, unknown>) ?? {},
            frameBytes: Buffer.byteLength(text),
            reply: (result) => this.send(JSON.stringify({ result, jsonrpc: '2.0', id })),
            replyRaw: (frame) => this.send(frame),
          };
          if (o.onCall) o.onCall(call);
          else call.reply({ content: [{ type: 'text', text: 'ok' }] });
        } else if (f.method === 'notifications/cancelled') o.onCancelled?.(this, f.params?.requestId);
      });
    });
  }

  private reconnect(attempt: number): void {
    if (this.retiring || attempt > 500) return;
    this.retryTimer = setTimeout(() => {
      this.connect().then(
        () => this.opts.onReconnected?.(this, performance.now()),
        () => this.reconnect(attempt + 1),
      );
    }, this.opts.reconnectDelayMs!(attempt));
  }

  send(frame: string): boolean {
    if (!this.open) return false;
    this.ws!.send(frame);
    return true;
  }

  /** Closes for good (1000) and waits until the socket is gone. */
  async close(): Promise<void> {
    this.retiring = true;
    clearTimeout(this.retryTimer);
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        ws.terminate();
        resolve();
      }, 2000);
      ws.once('close', () => {
        clearTimeout(t);
        resolve();
      });
      ws.close(1000, 'load test done');
    });
  }
}

const cache = new WeakMap<Surface, { init: string; tools: string }>();
function surfaceFrames(s: Surface): { init: string; tools: string } {
  let f = cache.get(s);
  if (!f) {
    f = {
      // The MCP SDK's member order (result, jsonrpc, id), as the reference phone writes its answers.
      init: `{"result":${JSON.stringify(s.initResult)},"jsonrpc":"2.0","id":@ID@}`,
      tools: `{"result":${JSON.stringify(s.toolsResult)},"jsonrpc":"2.0","id":@ID@}`,
    };
    cache.set(s, f);
  }
  return f;
}

function withId(template: string, id: number | string): string {
  return template.replace('@ID@', JSON.stringify(id));
}

/** "127.0.0.2".."127.0.0.(1+n)": source addresses that multiply the ephemeral ports (Linux routes all of 127/8 to lo). */
export function loopbackAddresses(n: number): string[] {
  return Array.from({ length: Math.max(1, Math.min(250, n)) }, (_, i) => `127.0.0.${i + 2}`);
}

export function keepAliveAgents(addresses: string[]): Map<string, HttpAgent> {
  return new Map(addresses.map((a) => [a, new HttpAgent({ keepAlive: true, maxSockets: 8, localAddress: a })]));
}
