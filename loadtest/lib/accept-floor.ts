// The accept floor (storm scenario, docs/BENCHMARKS.md): a bare uWebSockets.js server that
// does only what the protocol makes every accept of a phone the node has not seen cost the
// server (docs/decisions/0143-the-floor-verifies.md) — the challenge POST read and answered
// with a fresh single-use nonce, the WebSocket upgrade with the phone's headers read, the
// nonce taken, the phone's public key imported from its stored encoding (held in memory: no
// store) and its signature verified, both with the relay's own functions
// (src/crypto/device-auth.ts), then initialize, notifications/initialized and tools/list
// sent and the two answers received — and nothing else: no store, no bus, no metrics, no
// logging. Its CPU per accept, measured on the same phones in the same run, is what an accept
// costs on this machine before any of the relay's own work. Loadtest-only; it runs as its own
// child process so its CPU time is its own.
//
//   const floor = await startAcceptFloor(keys);   // { url, pid, cpu(), counts(), kill() }
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mainThreadCpuMs } from './proc-cpu.ts';

export interface AcceptFloor {
  child: ChildProcess;
  pid: number;
  url: string;
  /** CPU time the floor process has used so far (user + system, and the main thread alone), ms. */
  cpu(): Promise<{ cpuMs: number; cpuSystemMs: number; mainThreadCpuMs?: number }>;
  /** Phones that finished the handshake (both answers received) so far, challenges answered, upgrades, and upgrades refused (bad signature, unknown nonce or key). */
  counts(): Promise<{ accepts: number; challenges: number; upgrades: number; rejected: number }>;
  /** SIGKILL, as the storm does to the relay: the phones see their sockets drop. */
  kill(): Promise<void>;
}

type Request = { id: number; op: 'cpu' | 'counts' } | { id: number; op: 'keys'; keys: Array<[string, string]> };
type Message = { type: 'ready'; port: number } | { id: number; result: unknown };

const SELF = fileURLToPath(import.meta.url);
/** How long an issued nonce lasts, as the relay's challenge answers (docs/PROTOCOL.md). */
const NONCE_TTL_MS = 60_000;

/**
 * `keys`: each phone's id and its public key in the store's encoding (base64 SPKI DER), as
 * the relay would read them from its store; handed to the child before it resolves.
 */
export function startAcceptFloor(keys: Iterable<[string, string]>): Promise<AcceptFloor> {
  const child = fork(SELF, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let nextId = 1;
  const waiting = new Map<number, (v: unknown) => void>();
  child.on('message', (m: Message) => {
    if (!('id' in m)) return;
    waiting.get(m.id)?.(m.result);
    waiting.delete(m.id);
  });
  const ask = <T>(op: 'cpu' | 'counts' | 'keys') =>
    new Promise<T>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve as (v: unknown) => void);
      child.send((op === 'keys' ? { id, op, keys: [...keys] } : { id, op }) satisfies Request);
    });
  return new Promise((resolve, reject) => {
    child.once('exit', (code, signal) =>
      reject(new Error(`accept floor exited before it was ready (${code ?? signal})`)),
    );
    child.on('message', (m: Message) => {
      if (!('type' in m)) return;
      void ask('keys').then(() =>
        resolve({
          child,
          pid: child.pid!,
          url: `http://127.0.0.1:${m.port}`,
          cpu: () => ask('cpu'),
          counts: () => ask('counts'),
          async kill() {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
            await exited;
          },
        }),
      );
    });
  });
}

// ---- the child ------------------------------------------------------------------

async function childMain(): Promise<void> {
  const { uws } = await import('../../src/uws.ts');
  const { decodeNonce, importDevicePublicKey, newNonce, signedPayload, verifyDeviceSignature } =
    await import('../../src/crypto/device-auth.ts');
  const { ExpiringMap } = await import('../../src/bus/expiring-map.ts');
  const counts = { accepts: 0, challenges: 0, upgrades: 0, rejected: 0 };
  // Each phone's stored key encoding (its own string, as read from a store row): the floor
  // keeps no imported key, as a restarted node holds none.
  const storedKeys = new Map<string, string>();
  // Issued nonces: single use and expiring (docs/PROTOCOL.md), for the device they were issued
  // to; kept as the in-process bus keeps them, so one never redeemed is dropped when it expires.
  const nonces = new ExpiringMap<string>();
  let host = '';
  // The three frames the relay sends (src/gateway/device-connection.ts: ready()), built once.
  const INITIALIZE =
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"accept-floor","version":"0"}}}';
  const INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}';
  const TOOLS_LIST = '{"jsonrpc":"2.0","id":2,"method":"tools/list"}';
  type Data = { deviceId: string; stage: number; ok: boolean };
  const app = uws.App();
  app.post('/device/challenge', (res, _req) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    const chunks: Buffer[] = [];
    res.onData((chunk, last) => {
      chunks.push(Buffer.from(chunk.slice(0)));
      if (!last || aborted) return;
      let deviceId: unknown;
      try {
        deviceId = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { device_id?: unknown }).device_id;
      } catch {
        deviceId = undefined;
      }
      counts.challenges++;
      // A nonce is 32 random bytes (docs/PROTOCOL.md), cut from the relay's own pool.
      const nonce = typeof deviceId === 'string' ? newNonce().wire : '';
      if (typeof deviceId === 'string') nonces.set(nonce, deviceId, NONCE_TTL_MS);
      res.cork(() => {
        if (typeof deviceId !== 'string') res.writeStatus('400 Bad Request').end('{"error":"bad_request"}');
        else
          res
            .writeStatus('200 OK')
            .writeHeader('content-type', 'application/json')
            .end(`{"nonce":"${nonce}","expires_in":${NONCE_TTL_MS / 1000}}`);
      });
    });
  });
  app.ws<Data>('/device/ws', {
    maxPayloadLength: 1024 * 1024,
    idleTimeout: 0,
    sendPingsAutomatically: false,
    maxBackpressure: 8 * 1024 * 1024,
    compression: 0,
    upgrade: (res, req, context) => {
      // The headers every accept must read: the phone's four X-Device-* values and its app,
      // and the WebSocket handshake's own (copied: req is gone after the first await).
      const deviceId = req.getHeader('x-device-id');
      const nonceWire = req.getHeader('x-device-nonce');
      const ts = req.getHeader('x-device-ts');
      const sig = req.getHeader('x-device-sig');
      req.getHeader('x-device-app');
      const wsKey = req.getHeader('sec-websocket-key');
      const wsProtocol = req.getHeader('sec-websocket-protocol');
      const wsExtensions = req.getHeader('sec-websocket-extensions');
      counts.upgrades++;
      let aborted = false;
      res.onAborted(() => (aborted = true));
      // What the protocol forces on a node that has never seen the phone: take the nonce
      // (single use), import the stored key (checked to be a point on P-256), verify.
      const issued = nonces.get(nonceWire);
      nonces.delete(nonceWire);
      const nonce = decodeNonce(nonceWire);
      const stored = storedKeys.get(deviceId);
      const fresh = issued === deviceId;
      void (fresh && nonce && stored ? importDevicePublicKey(stored) : Promise.resolve(undefined)).then((key) => {
        if (aborted) return;
        const ok = key !== undefined && verifyDeviceSignature(key, signedPayload(nonce!, host, ts), sig);
        if (!ok) counts.rejected++;
        res.cork(() => res.upgrade<Data>({ deviceId, stage: 0, ok }, wsKey, wsProtocol, wsExtensions, context));
      });
    },
    open: (ws) => {
      // A refused phone learns why, as the relay's 4003 (src/gateway/device-socket.ts).
      if (!ws.getUserData().ok) return ws.end(4003, 'bad signature');
      ws.send(INITIALIZE, false, false);
    },
    message: (ws, _message, isBinary) => {
      if (isBinary) return;
      const d = ws.getUserData();
      // The answers are read (uWS hands them over) but not parsed: the relay parses neither
      // when they equal a recent one (src/gateway/intern-table.ts).
      if (d.stage === 0) {
        d.stage = 1;
        ws.cork(() => {
          ws.send(INITIALIZED, false, false);
          ws.send(TOOLS_LIST, false, false);
        });
      } else if (d.stage === 1) {
        d.stage = 2;
        counts.accepts++;
      }
    },
  });
  process.on('message', (m: Request) => {
    const answer = (result: unknown) => process.send!({ id: m.id, result });
    if (m.op === 'counts') return answer({ ...counts });
    if (m.op === 'keys') {
      for (const [id, spki] of m.keys) storedKeys.set(id, spki);
      return answer(storedKeys.size);
    }
    const cpu = process.cpuUsage();
    answer({
      cpuMs: (cpu.user + cpu.system) / 1000,
      cpuSystemMs: cpu.system / 1000,
      mainThreadCpuMs: mainThreadCpuMs(),
    });
  });
  process.on('disconnect', () => process.exit(0));
  app.listen('127.0.0.1', 0, (socket) => {
    if (!socket) {
      console.error('accept floor: could not listen');
      process.exit(1);
    }
    const port = uws.us_socket_local_port(socket);
    // The phones sign against the host they connect to (docs/decisions/0010-signature-binds-relay-host.md).
    host = `127.0.0.1:${port}`;
    process.send!({ type: 'ready', port } satisfies Message);
  });
}

if (process.argv[1] === SELF && process.send) {
  childMain().catch((err) => {
    console.error(`accept floor: ${(err as Error).stack ?? err}`);
    process.exit(1);
  });
}
