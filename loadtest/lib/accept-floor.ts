// The accept floor (storm scenario, docs/BENCHMARKS.md): a bare uWebSockets.js server that
// does only what the seed protocol makes every phone accept cost the server — the challenge
// POST read and answered with a fresh nonce, the WebSocket upgrade with the phone's headers
// read, then initialize, notifications/initialized and tools/list sent and the two answers
// received — and nothing else: no signature check, no key import, no store, no bus, no
// metrics, no logging. Its CPU per accept, measured on the same phones in the same run, is
// what an accept costs on this machine before any of the relay's own work. Loadtest-only; it
// runs as its own child process so its CPU time is its own.
//
//   const floor = await startAcceptFloor();   // { url, pid, cpu(), accepts(), kill() }
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { mainThreadCpuMs } from './proc-cpu.ts';

export interface AcceptFloor {
  child: ChildProcess;
  pid: number;
  url: string;
  /** CPU time the floor process has used so far (user + system, and the main thread alone), ms. */
  cpu(): Promise<{ cpuMs: number; cpuSystemMs: number; mainThreadCpuMs?: number }>;
  /** Phones that finished the handshake (both answers received) so far, and challenges answered. */
  counts(): Promise<{ accepts: number; challenges: number; upgrades: number }>;
  /** SIGKILL, as the storm does to the relay: the phones see their sockets drop. */
  kill(): Promise<void>;
}

type Request = { id: number; op: 'cpu' | 'counts' };
type Message = { type: 'ready'; port: number } | { id: number; result: unknown };

const SELF = fileURLToPath(import.meta.url);

export function startAcceptFloor(): Promise<AcceptFloor> {
  const child = fork(SELF, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let nextId = 1;
  const waiting = new Map<number, (v: unknown) => void>();
  child.on('message', (m: Message) => {
    if (!('id' in m)) return;
    waiting.get(m.id)?.(m.result);
    waiting.delete(m.id);
  });
  const ask = <T>(op: Request['op']) =>
    new Promise<T>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve as (v: unknown) => void);
      child.send({ id, op } satisfies Request);
    });
  return new Promise((resolve, reject) => {
    child.once('exit', (code, signal) =>
      reject(new Error(`accept floor exited before it was ready (${code ?? signal})`)),
    );
    child.on('message', (m: Message) => {
      if (!('type' in m)) return;
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
      });
    });
  });
}

// ---- the child ------------------------------------------------------------------

async function childMain(): Promise<void> {
  const { uws } = await import('../../src/uws.ts');
  const counts = { accepts: 0, challenges: 0, upgrades: 0 };
  // The three frames the relay sends (src/gateway/device-connection.ts: ready()), built once.
  const INITIALIZE =
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"accept-floor","version":"0"}}}';
  const INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}';
  const TOOLS_LIST = '{"jsonrpc":"2.0","id":2,"method":"tools/list"}';
  // A nonce is 32 random bytes (docs/PROTOCOL.md); cut from a pool, as the relay does.
  let pool = Buffer.alloc(0);
  let at = 0;
  const nonce = () => {
    if (at + 32 > pool.length) {
      pool = randomBytes(32 * 128);
      at = 0;
    }
    return pool.subarray(at, (at += 32)).toString('base64url');
  };
  type Data = { deviceId: string; stage: number };
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
      res.cork(() => {
        if (typeof deviceId !== 'string') res.writeStatus('400 Bad Request').end('{"error":"bad_request"}');
        else
          res
            .writeStatus('200 OK')
            .writeHeader('content-type', 'application/json')
            .end(`{"nonce":"${nonce()}","expires_in":60}`);
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
      // and the WebSocket handshake's own.
      const deviceId = req.getHeader('x-device-id');
      req.getHeader('x-device-nonce');
      req.getHeader('x-device-ts');
      req.getHeader('x-device-sig');
      req.getHeader('x-device-app');
      counts.upgrades++;
      res.upgrade<Data>(
        { deviceId, stage: 0 },
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open: (ws) => {
      ws.send(INITIALIZE, false, false);
    },
    message: (ws, _message, isBinary) => {
      if (isBinary) return;
      const d = ws.getUserData();
      // The answers are read (uWS hands them over) but not parsed: the relay parses neither
      // when they equal a recent one (src/gateway/shared-surface.ts).
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
    const cpu = process.cpuUsage();
    void mainThreadCpuMs().then((main) =>
      answer({ cpuMs: (cpu.user + cpu.system) / 1000, cpuSystemMs: cpu.system / 1000, mainThreadCpuMs: main }),
    );
  });
  process.on('disconnect', () => process.exit(0));
  app.listen('127.0.0.1', 0, (socket) => {
    if (!socket) {
      console.error('accept floor: could not listen');
      process.exit(1);
    }
    process.send!({ type: 'ready', port: uws.us_socket_local_port(socket) } satisfies Message);
  });
}

if (process.argv[1] === SELF && process.send) {
  childMain().catch((err) => {
    console.error(`accept floor: ${(err as Error).stack ?? err}`);
    process.exit(1);
  });
}
