// Toxiproxy (Shopify's fault-injecting TCP proxy, built into .tools/ by
// scripts/ensure-toxiproxy.sh) as a child process on a free port, driven over its HTTP API.
// One server per test file; each proxy listens on an ephemeral port and forwards to a real
// Redis, Postgres or relay, so a fault hits exactly the connections that go through it.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const TOXIPROXY_BIN = fileURLToPath(new URL('../../.tools/toxiproxy-server', import.meta.url));

/** The toxics the fault tests use, with the attributes Toxiproxy v2 takes (times in ms, rate in KB/s). */
export type Toxic =
  | { type: 'latency'; attributes: { latency: number; jitter?: number } }
  /** Nothing passes; with timeout 0 the connection is never closed (a half-open peer), else closed after it. */
  | { type: 'timeout'; attributes: { timeout: number } }
  /** Closes with a TCP RST after `timeout` ms (0: at once, on the next data). */
  | { type: 'reset_peer'; attributes: { timeout: number } }
  | { type: 'bandwidth'; attributes: { rate: number } };

export type Stream = 'upstream' | 'downstream';

export interface Proxy {
  readonly name: string;
  /** host:port the proxy listens on. */
  readonly listen: string;
  readonly port: number;
  /** The same URL (scheme, credentials, path, query) reached through this proxy. */
  through(url: string): string;
  /** Adds a toxic on one direction (downstream: what the server sends back). Returns its name. */
  add(toxic: Toxic, opts?: { stream?: Stream; name?: string; toxicity?: number }): Promise<string>;
  remove(name: string): Promise<void>;
  /** Removes every toxic of this proxy. */
  clear(): Promise<void>;
  /** A disabled proxy refuses new connections and closes the ones it has (a restarted server). */
  setEnabled(enabled: boolean): Promise<void>;
}

export interface Toxiproxy {
  readonly api: string;
  proxy(name: string, upstream: string): Promise<Proxy>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function call(api: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${api}${path}`, {
    method,
    headers: body === undefined ? undefined : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`toxiproxy ${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** Starts toxiproxy-server on a free port (retried if another process took it first). */
export async function startToxiproxy(): Promise<Toxiproxy> {
  if (!existsSync(TOXIPROXY_BIN)) {
    throw new Error(`${TOXIPROXY_BIN} is missing: run \`bash scripts/ensure-toxiproxy.sh\` once (builds it with Go)`);
  }
  let proc: ChildProcess | undefined;
  let api = '';
  for (let attempt = 0; attempt < 5 && !api; attempt++) {
    const port = await freePort();
    const p = spawn(TOXIPROXY_BIN, ['-host', '127.0.0.1', '-port', String(port)], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    p.stderr?.resume();
    const exited = new Promise<void>((r) => p.once('exit', () => r()));
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 100; i++) {
      const v = await fetch(`${url}/version`)
        .then((r) => r.text())
        .catch(() => undefined);
      if (v) {
        api = url;
        proc = p;
        break;
      }
      if (p.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!api) {
      p.kill('SIGKILL');
      await exited;
    }
  }
  if (!api || !proc) throw new Error('toxiproxy-server did not start');
  const child = proc;
  return {
    api,
    async proxy(name, upstream) {
      const p = (await call(api, 'POST', '/proxies', { name, listen: '127.0.0.1:0', upstream, enabled: true })) as {
        listen: string;
      };
      const path = `/proxies/${encodeURIComponent(name)}`;
      return {
        name,
        listen: p.listen,
        port: Number(p.listen.split(':').pop()),
        through(url) {
          const u = new URL(url);
          u.hostname = '127.0.0.1';
          u.port = p.listen.split(':').pop()!;
          return u.toString();
        },
        async add(toxic, o = {}) {
          const stream = o.stream ?? 'downstream';
          const tname = o.name ?? `${toxic.type}_${stream}`;
          await call(api, 'POST', `${path}/toxics`, { ...toxic, name: tname, stream, toxicity: o.toxicity ?? 1 });
          return tname;
        },
        async remove(tname) {
          await call(api, 'DELETE', `${path}/toxics/${encodeURIComponent(tname)}`);
        },
        async clear() {
          const list = (await call(api, 'GET', `${path}/toxics`)) as Array<{ name: string }>;
          for (const t of list) await call(api, 'DELETE', `${path}/toxics/${encodeURIComponent(t.name)}`);
        },
        async setEnabled(enabled) {
          await call(api, 'POST', path, { enabled });
        },
      };
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGKILL');
      await gone;
    },
  };
}
