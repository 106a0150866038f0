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
import { BenchControlPlane, INITIALIZED_FRAME, initializeFrame } from './control-plane.ts';

const { values } = parseArgs({ options: { code: { type: 'string' }, key: { type: 'string' } } });
const control = new BenchControlPlane(values.code!);
const keyHash = createHash('sha256').update(values.key!).digest();

interface Pending {
  res: ServerResponse;
  clientId: unknown;
  timer: NodeJS.Timeout;
}

let phone: WebSocket | undefined;
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
    const paired = control.pair(body);
    return paired ? json(res, 200, paired) : json(res, 403, { error: 'bad_code' });
  }
  if (req.url === '/device/challenge' && req.method === 'POST') return json(res, 200, control.challenge(body));
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
  const ws = phone;
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
  const ok = control.upgradeAllowed({
    id: h['x-device-id'] ?? '',
    nonce: h['x-device-nonce'] ?? '',
    ts: h['x-device-ts'] ?? '',
    sig: h['x-device-sig'] ?? '',
  });
  wss.handleUpgrade(req, socket, head, (ws) => {
    if (!ok) return ws.close(4003, 'unauthorised');
    attach(ws);
  });
});

function attach(ws: WebSocket): void {
  phone = ws;
  ws.on('message', (data) => {
    const msg = JSON.parse((data as Buffer).toString('utf8'));
    if (msg.method === 'ping' && msg.id !== undefined) {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: {} }));
      return;
    }
    if (msg.id === 'init') {
      ws.send(INITIALIZED_FRAME);
      process.send?.({ type: 'phone', deviceId: control.device!.id });
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
    if (phone === ws) phone = undefined;
  });
  ws.send(initializeFrame('baseline-relay'));
}

server.listen(0, '127.0.0.1', () => {
  const port = (server.address() as { port: number }).port;
  control.relayHost = `127.0.0.1:${port}`;
  process.send?.({ type: 'ready', port, url: `http://${control.relayHost}` });
});
process.on('disconnect', () => process.exit(0));
// An exit, not the signal's default, so that `--cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));
