// A tiny stand-in for the relay's device side, for tests: /pair, /device/challenge and a
// /device/ws upgrade that checks the five headers and the signature exactly as the real relay must.
// Not the relay: no store, no bus, no clients.
import { randomUUID, type KeyObject } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebSocket, WebSocketServer } from 'ws';
import { decodeNonce, newNonce, parseDevicePublicKey, signedPayload, verifyDeviceSignature } from '../../crypto/device-auth.ts';
import { WebSocketTransport } from './ws-transport.ts';

export interface TestRelayOptions {
  /** The host bound into signatures; default "relay.test". */
  relayHost?: string;
  /** Serve https with this key and certificate. */
  tls?: { key: string; cert: string };
  /** Pairing codes that /pair accepts (single use). */
  codes?: string[];
  /** false: never answer pings, to play a dead path. */
  autoPong?: boolean;
}

export interface UpgradeRecord {
  headers: Record<string, string | undefined>;
  /** undefined when accepted, else why it was refused. */
  refused?: string;
}

export class TestRelay extends EventEmitter<{ device: [WebSocket, string] }> {
  readonly relayHost: string;
  readonly codes: Set<string>;
  readonly devices = new Map<string, { publicKey: KeyObject; name: string }>();
  readonly upgrades: UpgradeRecord[] = [];
  readonly sockets: WebSocket[] = [];
  /** Set to an HTTP status to refuse every upgrade with it. */
  refuseUpgrades: number | undefined;
  private readonly nonces = new Map<string, number>();
  private readonly server: Server;
  private readonly wss: WebSocketServer;
  private readonly secure: boolean;

  constructor(opts: TestRelayOptions = {}) {
    super();
    this.relayHost = opts.relayHost ?? 'relay.test';
    this.codes = new Set(opts.codes ?? []);
    this.secure = !!opts.tls;
    this.wss = new WebSocketServer({ noServer: true, autoPong: opts.autoPong ?? true });
    const handler = (req: IncomingMessage, res: ServerResponse) => void this.onRequest(req, res);
    this.server = opts.tls ? createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, handler) : createHttpServer(handler);
    this.server.on('upgrade', (req, socket, head) => this.onUpgrade(req, socket, head));
  }

  async listen(port = 0): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    return this;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `${this.secure ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** A QR payload for a fresh single-use code. */
  qr(fp?: string): string {
    const code = randomUUID().toUpperCase();
    this.codes.add(code);
    return JSON.stringify({ v: 1, relay: this.url, code, ...(fp ? { fp } : {}) });
  }

  /** The next accepted device socket. */
  nextDevice(): Promise<WebSocket> {
    return new Promise((resolve) => this.once('device', (ws) => resolve(ws)));
  }

  /** Acts as the relay's MCP client on a device socket: initialize + notifications/initialized. */
  async initialize(ws: WebSocket): Promise<Client> {
    const client = new Client({ name: 'test-relay', version: '0' });
    await client.connect(new WebSocketTransport(ws));
    return client;
  }

  async close(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    const reply = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (req.method === 'POST' && req.url === '/pair') {
      const publicKey = typeof body?.public_key === 'string' ? parseDevicePublicKey(body.public_key) : undefined;
      if (!publicKey) return reply(400, { error: 'bad_request', message: 'public_key' });
      if (!this.codes.delete(body.code)) return reply(403, { error: 'bad_code', message: 'invalid or expired code' });
      const deviceId = `dev_${randomUUID().slice(0, 8)}`;
      this.devices.set(deviceId, { publicKey, name: String(body.name) });
      return reply(200, { device_id: deviceId, relay_host: this.relayHost });
    }
    if (req.method === 'POST' && req.url === '/device/challenge') {
      const nonce = newNonce();
      this.nonces.set(nonce.wire, Date.now() + 60_000);
      return reply(200, { nonce: nonce.wire, expires_in: 60 });
    }
    reply(404, { error: 'not_found', message: req.url });
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const header = (name: string) => req.headers[name.toLowerCase()] as string | undefined;
    const headers = Object.fromEntries(['X-Device-Id', 'X-Device-Nonce', 'X-Device-Ts', 'X-Device-Sig', 'X-Device-App'].map((h) => [h, header(h)]));
    const refused = this.check(req.url, headers);
    this.upgrades.push({ headers, refused });
    if (refused) {
      const status = this.refuseUpgrades ?? 401;
      socket.end(`HTTP/1.1 ${status} Unauthorized\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify({ error: 'unauthorised', message: refused })}`);
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      this.sockets.push(ws);
      this.emit('device', ws, headers['X-Device-Id']!);
    });
  }

  private check(url: string | undefined, h: Record<string, string | undefined>): string | undefined {
    if (this.refuseUpgrades) return 'refused by test';
    if (url !== '/device/ws') return `wrong path ${url}`;
    if (!h['X-Device-App']?.startsWith('phonebridge-agent/')) return 'X-Device-App missing';
    const device = h['X-Device-Id'] ? this.devices.get(h['X-Device-Id']) : undefined;
    if (!device) return 'unknown device';
    const nonceWire = h['X-Device-Nonce'] ?? '';
    const expires = this.nonces.get(nonceWire);
    this.nonces.delete(nonceWire); // single use
    const nonce = decodeNonce(nonceWire);
    if (!nonce || expires === undefined || expires < Date.now()) return 'unknown, reused or expired nonce';
    const ts = h['X-Device-Ts'] ?? '';
    if (!/^\d+$/.test(ts) || Math.abs(Number(ts) - Date.now() / 1000) > 60) return 'clock skew';
    if (!verifyDeviceSignature(device.publicKey, signedPayload(nonce, this.relayHost, ts), h['X-Device-Sig'] ?? '')) return 'bad signature';
    return undefined;
  }
}
