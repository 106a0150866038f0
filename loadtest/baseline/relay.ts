// The baseline for `npm run loadtest -- relay-overhead`: the relay protocol written the obvious
// way, with node:http + ws, a JSON.parse and JSON.stringify of every message. Same seed
// protocol as phonebridge (pairing, challenge + signed upgrade, sessions, id rewrite), so the
// reference phone (src/device/agent) connects to it unchanged. One device, one API key, all in
// memory: a benchmark target, not a product.
//
//   fork('loadtest/baseline/relay.ts', ['--code', CODE, '--key', KEY]) → IPC { type: 'ready', port, url }
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomBytes, createHash, timingSafeEqual } from 'node:crypto';
import { parseArgs } from 'node:util';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  decodeNonce,
  newNonce,
  parseDevicePublicKey,
  signedPayload,
  verifyDeviceSignature,
} from '../../src/crypto/device-auth.ts';

const { values } = parseArgs({ options: { code: { type: 'string' }, key: { type: 'string' } } });
const pairingCode = values.code!;
const keyHash = createHash('sha256').update(values.key!).digest();

interface Device {
  id: string;
  publicKey: string;
  ws?: WebSocket;
}
interface Pending {
  res: ServerResponse;
  clientId: unknown;
  timer: NodeJS.Timeout;
}

let device: Device | undefined;
let relayHost = '';
const nonces = new Map<string, string>();
const sessions = new Set<string>();
const pending = new Map<number, Pending>();
let nextId = 1;

function json(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(value));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function authorised(req: IncomingMessage): boolean {
  const key = req.headers['x-api-key'];
  if (typeof key !== 'string') return false;
  return timingSafeEqual(createHash('sha256').update(key).digest(), keyHash);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readBody(req);
  if (req.url === '/pair' && req.method === 'POST') {
    const input = JSON.parse(body);
    if (input.code !== pairingCode || device) return json(res, 403, { error: 'bad_code' });
    device = { id: `dev_${randomBytes(8).toString('hex')}`, publicKey: input.public_key };
    return json(res, 200, { device_id: device.id, relay_host: relayHost });
  }
  if (req.url === '/device/challenge' && req.method === 'POST') {
    const input = JSON.parse(body);
    const nonce = newNonce();
    nonces.set(nonce.wire, input.device_id);
    return json(res, 200, { nonce: nonce.wire, expires_in: 60 });
  }
  if (req.url !== '/mcp' || req.method !== 'POST') return json(res, 404, { error: 'not_found' });
  if (!authorised(req)) return json(res, 401, { error: 'unauthorized' });
  const msg = JSON.parse(body);
  if (msg.method === 'initialize') {
    const id = randomBytes(18).toString('base64url');
    sessions.add(id);
    return json(
      res,
      200,
      {
        jsonrpc: '2.0',
        id: msg.id,
        result: {
          protocolVersion: msg.params?.protocolVersion ?? '2025-11-25',
          capabilities: { tools: {} },
          serverInfo: { name: 'baseline-relay', version: '0' },
        },
      },
      { 'mcp-session-id': id },
    );
  }
  const session = req.headers['mcp-session-id'];
  if (typeof session !== 'string' || !sessions.has(session)) return json(res, 404, { error: 'session not found' });
  if (msg.id === undefined) {
    res.writeHead(202).end();
    return;
  }
  const ws = device?.ws;
  if (!ws) return json(res, 200, { jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: 'device_offline' } });
  const relayId = nextId++;
  const timer = setTimeout(() => {
    pending.delete(relayId);
    json(res, 200, { jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: 'timeout' } });
  }, 30_000);
  pending.set(relayId, { res, clientId: msg.id, timer });
  ws.send(JSON.stringify({ ...msg, id: relayId }));
}

const server = createServer((req, res) => {
  handle(req, res).catch(() => {
    if (!res.headersSent) json(res, 400, { error: 'bad_request' });
  });
});
server.keepAliveTimeout = 60_000;

const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });
server.on('upgrade', (req, socket, head) => {
  const h = req.headers as Record<string, string | undefined>;
  const nonceWire = h['x-device-nonce'] ?? '';
  const issuedFor = nonces.get(nonceWire);
  nonces.delete(nonceWire);
  const nonce = decodeNonce(nonceWire);
  const key = device ? parseDevicePublicKey(device.publicKey) : undefined;
  const ok =
    device &&
    key &&
    nonce &&
    issuedFor === device.id &&
    h['x-device-id'] === device.id &&
    verifyDeviceSignature(key, signedPayload(nonce, relayHost, h['x-device-ts'] ?? ''), h['x-device-sig'] ?? '');
  wss.handleUpgrade(req, socket, head, (ws) => {
    if (!ok) return ws.close(4003, 'unauthorised');
    attach(ws);
  });
});

function attach(ws: WebSocket): void {
  device!.ws = ws;
  ws.on('message', (data) => {
    const msg = JSON.parse((data as Buffer).toString('utf8'));
    if (msg.method === 'ping' && msg.id !== undefined) {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: {} }));
      return;
    }
    if (msg.id === 'init') {
      ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      process.send?.({ type: 'phone', deviceId: device!.id });
      return;
    }
    const p = typeof msg.id === 'number' ? pending.get(msg.id) : undefined;
    if (!p) return;
    pending.delete(msg.id);
    clearTimeout(p.timer);
    msg.id = p.clientId;
    p.res.writeHead(200, { 'content-type': 'application/json' });
    p.res.end(JSON.stringify(msg));
  });
  ws.on('close', () => {
    if (device?.ws === ws) device.ws = undefined;
  });
  ws.send(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'baseline-relay', version: '0' } },
    }),
  );
}

server.listen(0, '127.0.0.1', () => {
  const port = (server.address() as { port: number }).port;
  relayHost = `127.0.0.1:${port}`;
  process.send?.({ type: 'ready', port, url: `http://${relayHost}` });
});
process.on('disconnect', () => process.exit(0));
// An exit, not the signal's default, so that `--cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));
