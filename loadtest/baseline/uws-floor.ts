// The floor for `npm run loadtest -- relay-overhead`: the least a relay on uWebSockets.js 20.30
// can do per forwarded call on this machine. The same control plane as the baseline
// (loadtest/baseline/control-plane.ts: pairing, challenge + signed upgrade, so the reference
// phone connects unchanged), but per call only what no relay can skip: read the POST, find the
// client's id, give the frame a relay id, send it to the phone, find the relay id in the
// phone's answer, put the client's id back, write the answer. No JSON parse, no API-key
// check, no metrics, no timeouts, no error paths. Writes go as phonebridge's do
// (docs/decisions/0050-one-write-per-answer.md): queued to the end of the turn, each inside its
// own socket's cork, so both sides pay one syscall per socket per turn.
//
// Not a relay: it trusts every request and never times a call out. What phonebridge costs
// above this per call is what its protocol work costs; what this costs is uWS, V8's callbacks
// and the kernel's loopback TCP, the same for any relay here.
//
// Two of them make the two-node floor: the same per-call work, with Redis pub/sub between the
// node a client calls (the origin) and the node that holds the phone (the owner), as the
// relay's cluster routes (docs/decisions/0231-the-two-node-floor.md). The origin publishes the
// frame to the owner's channel; the owner gives it an id of its own, and publishes the answer
// back with the origin's id restored. Through loadtest/lib/raw-pubsub.ts (no client library,
// the publishing connection with replies off), a turn's messages in one write.
//
//   fork('loadtest/baseline/uws-floor.ts', ['--code', CODE]) → IPC { type: 'ready', port, url }
//   owner:  … ['--code', CODE, '--redis-url', URL, '--channel', A]
//   origin: … ['--code', OTHER, '--redis-url', URL, '--channel', B, '--owner-channel', A]
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { uws, type HttpResponse, type WebSocket } from '../../src/uws.ts';
import { rawPubSub } from '../lib/raw-pubsub.ts';
import { BenchControlPlane, INITIALIZED_FRAME, initializeFrame } from './control-plane.ts';

const { values } = parseArgs({
  options: {
    code: { type: 'string' },
    'redis-url': { type: 'string' },
    channel: { type: 'string' },
    'owner-channel': { type: 'string' },
  },
});
const control = new BenchControlPlane(values.code!);

interface Waiting {
  res: HttpResponse;
  clientId: string;
  aborted: boolean;
}

let phone: WebSocket<object> | undefined;
const sessions = new Set<string>();
const waiting = new Map<number, Waiting>();
/** On the owner: a request another node sent, by this node's id for it. */
const remote = new Map<number, { origin: string; originId: string }>();
let nextId = 1;

// ---- between nodes (the two-node floor) ----------------------------------------------------
// `q<origin channel>\n<frame>` is a request to the owner, `a<frame>` an answer to the origin.
const channel = values.channel ?? '';
const ownerChannel = values['owner-channel'];
const bus = values['redis-url']
  ? await rawPubSub(values['redis-url'], channel, fromNode, { perTurn: true })
  : undefined;

function fromNode(msg: string): void {
  if (msg[0] === 'a') return fromPhone(msg.slice(1));
  const nl = msg.indexOf('\n');
  const frame = msg.slice(nl + 1);
  const span = findId(frame, 'start');
  if (!span) return;
  const relayId = nextId++;
  remote.set(relayId, { origin: msg.slice(1, nl), originId: frame.slice(span.start, span.end) });
  frames.push(frame.slice(0, span.start) + relayId + frame.slice(span.end));
  schedule();
}

// ---- end-of-turn writes ------------------------------------------------------------------

const answers: Array<{ w: Waiting; body: string }> = [];
let frames: string[] = [];
let flushScheduled = false;
let corkedAnswer: { w: Waiting; body: string };
const writeAnswer = () => corkedAnswer.w.res.writeHeader('content-type', 'application/json').end(corkedAnswer.body);
let corkedFrames: string[];
const writeFrames = () => {
  for (const f of corkedFrames) phone?.send(f, false);
};

function flush(): void {
  flushScheduled = false;
  if (frames.length > 0 && phone) {
    corkedFrames = frames;
    frames = [];
    phone.cork(writeFrames);
  }
  for (const a of answers.splice(0)) {
    if (a.w.aborted) continue;
    corkedAnswer = a;
    a.w.res.cork(writeAnswer);
  }
}

function schedule(): void {
  if (flushScheduled) return;
  flushScheduled = true;
  setImmediate(flush);
}

// ---- the per-call path -------------------------------------------------------------------

/** Where the value of the first (or last) `"id":` member is: an integer or a string without escapes. */
function findId(text: string, from: 'start' | 'end'): { start: number; end: number } | undefined {
  const at = from === 'start' ? text.indexOf('"id":') : text.lastIndexOf('"id":');
  if (at < 0) return undefined;
  const start = at + 5;
  let end = start;
  if (text.charCodeAt(start) === 34) end = text.indexOf('"', start + 1) + 1;
  else for (let c = text.charCodeAt(end); (c >= 48 && c <= 57) || c === 45; c = text.charCodeAt(end)) end++;
  return end > start ? { start, end } : undefined;
}

function forward(res: HttpResponse, body: string, w: Waiting): void {
  const span = findId(body, 'start');
  if (!span) {
    // A notification (no id): accepted.
    res.writeStatus('202 Accepted').end();
    return;
  }
  const relayId = nextId++;
  w.clientId = body.slice(span.start, span.end);
  waiting.set(relayId, w);
  const frame = body.slice(0, span.start) + relayId + body.slice(span.end);
  if (bus && ownerChannel && !phone) return bus.publish(ownerChannel, `q${channel}\n${frame}`);
  frames.push(frame);
  schedule();
}

function fromPhone(text: string): void {
  const span = findId(text, 'end');
  if (!span) return;
  const relayId = Number(text.slice(span.start, span.end));
  const from = remote.get(relayId);
  if (from && bus) {
    remote.delete(relayId);
    bus.publish(from.origin, `a${text.slice(0, span.start)}${from.originId}${text.slice(span.end)}`);
    return;
  }
  const w = waiting.get(relayId);
  if (!w) return;
  waiting.delete(relayId);
  answers.push({ w, body: text.slice(0, span.start) + w.clientId + text.slice(span.end) });
  schedule();
}

// ---- the control plane (control-plane.ts) behind uWS ----------------------------------------

function readBody(res: HttpResponse, done: (body: string) => void): void {
  const chunks: Buffer[] = [];
  res.onData((chunk, last) => {
    chunks.push(Buffer.from(chunk.slice(0)));
    if (last) done(chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8'));
  });
}

function json(res: HttpResponse, status: string, value: unknown, headers: Record<string, string> = {}): void {
  res.cork(() => {
    res.writeStatus(status).writeHeader('content-type', 'application/json');
    for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
    res.end(JSON.stringify(value));
  });
}

const app = uws.App();
app.post('/pair', (res) => {
  res.onAborted(() => {});
  readBody(res, (body) => {
    const paired = control.pair(body);
    if (paired) json(res, '200 OK', paired);
    else json(res, '403 Forbidden', { error: 'bad_code' });
  });
});
app.post('/device/challenge', (res) => {
  res.onAborted(() => {});
  readBody(res, (body) => {
    json(res, '200 OK', control.challenge(body));
  });
});
app.post('/mcp', (res, req) => {
  const sid = req.getHeader('mcp-session-id');
  const w: Waiting = { res, clientId: '', aborted: false };
  res.onAborted(() => (w.aborted = true));
  readBody(res, (body) => {
    if (sid && sessions.has(sid)) return forward(res, body, w);
    if (body.includes('"initialize"')) {
      const id = randomBytes(18).toString('base64url');
      sessions.add(id);
      const span = findId(body, 'start');
      return json(
        res,
        '200 OK',
        {
          jsonrpc: '2.0',
          id: span ? JSON.parse(body.slice(span.start, span.end)) : null,
          result: {
            protocolVersion: '2025-11-25',
            capabilities: { tools: {} },
            serverInfo: { name: 'uws-floor', version: '0' },
          },
        },
        { 'mcp-session-id': id },
      );
    }
    json(res, '404 Not Found', { error: 'session not found' });
  });
});
app.ws<object>('/device/ws', {
  maxPayloadLength: 1024 * 1024,
  idleTimeout: 0,
  upgrade: (res, req, context) => {
    const h = {
      id: req.getHeader('x-device-id'),
      nonce: req.getHeader('x-device-nonce'),
      ts: req.getHeader('x-device-ts'),
      sig: req.getHeader('x-device-sig'),
      key: req.getHeader('sec-websocket-key'),
      protocol: req.getHeader('sec-websocket-protocol'),
      extensions: req.getHeader('sec-websocket-extensions'),
    };
    const ok = control.upgradeAllowed(h);
    if (!ok) {
      res.writeStatus('401 Unauthorized').end();
      return;
    }
    res.upgrade({}, h.key, h.protocol, h.extensions, context);
  },
  open: (ws) => {
    phone = ws;
    ws.send(initializeFrame('uws-floor'));
  },
  message: (ws, data) => {
    const text = Buffer.from(data).toString('utf8');
    if (text.includes('"id":"init"')) {
      ws.send(INITIALIZED_FRAME);
      process.send?.({ type: 'phone', deviceId: control.device!.id });
      return;
    }
    if (text.includes('"method":"ping"')) {
      const span = findId(text, 'start');
      if (span) ws.send(`{"jsonrpc":"2.0","id":${text.slice(span.start, span.end)},"result":{}}`);
      return;
    }
    fromPhone(text);
  },
  close: (ws) => {
    if (phone === ws) phone = undefined;
  },
});
app.listen('127.0.0.1', 0, (listen) => {
  if (!listen) throw new Error('uws-floor: listen failed');
  const port = uws.us_socket_local_port(listen);
  control.relayHost = `127.0.0.1:${port}`;
  process.send?.({ type: 'ready', port, url: `http://${control.relayHost}` });
});
process.on('disconnect', () => process.exit(0));
// An exit, not the signal's default, so that `--cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));
