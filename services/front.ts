// A tiny round-robin TCP front for a local cluster (`npm run cluster`, the cluster tests and
// load tests). FOR TESTING ONLY: production puts the nodes behind the Kubernetes
// Service/Ingress (docs/OPERATIONS.md). Each accepted connection is piped, bytes untouched, to
// the next backend, so HTTP keep-alive, SSE and WebSocket upgrades all pass through. A backend
// that refuses a connection (killed, or draining: its listen socket is closed) is skipped and
// left alone for `downForMs`; the client never sees the refusal while another backend is up.
import net from 'node:net';

export interface Backend {
  host: string;
  port: number;
}

export interface FrontOptions {
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  backends?: Backend[];
  /** How long a backend that refused a connection is skipped. Default 1000. */
  downForMs?: number;
  /** Longest wait for a backend to accept. Default 2000. */
  connectTimeoutMs?: number;
}

export interface Front {
  readonly host: string;
  readonly port: number;
  /** http://host:port */
  readonly url: string;
  setBackends(backends: Backend[]): void;
  /** Connections piped so far, per backend `host:port`. */
  readonly counts: Map<string, number>;
  /** Stops accepting and destroys every piped connection. */
  close(): Promise<void>;
}

export async function startFront(opts: FrontOptions = {}): Promise<Front> {
  const host = opts.host ?? '127.0.0.1';
  const downForMs = opts.downForMs ?? 1000;
  const connectTimeoutMs = opts.connectTimeoutMs ?? 2000;
  let backends: Backend[] = [...(opts.backends ?? [])];
  const downUntil = new Map<string, number>();
  const counts = new Map<string, number>();
  const open = new Set<net.Socket>();
  let next = 0;

  const keyOf = (b: Backend) => `${b.host}:${b.port}`;

  /** Backends to try for one connection: round-robin order, healthy ones first. */
  function candidates(): Backend[] {
    const n = backends.length;
    if (n === 0) return [];
    const start = next++ % n;
    const order = Array.from({ length: n }, (_, i) => backends[(start + i) % n]);
    const now = Date.now();
    const up = order.filter((b) => (downUntil.get(keyOf(b)) ?? 0) <= now);
    const down = order.filter((b) => (downUntil.get(keyOf(b)) ?? 0) > now);
    return [...up, ...down];
  }

  function track(s: net.Socket): void {
    open.add(s);
    s.once('close', () => open.delete(s));
  }

  function connect(b: Backend): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host: b.host, port: b.port });
      const timer = setTimeout(() => s.destroy(new Error('connect timeout')), connectTimeoutMs);
      s.once('connect', () => {
        clearTimeout(timer);
        s.off('error', reject);
        resolve(s);
      });
      s.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (client) => {
    track(client);
    client.on('error', () => {});
    void (async () => {
      for (const b of candidates()) {
        if (client.destroyed) return;
        let upstream: net.Socket;
        try {
          upstream = await connect(b);
        } catch {
          downUntil.set(keyOf(b), Date.now() + downForMs);
          continue;
        }
        downUntil.delete(keyOf(b));
        counts.set(keyOf(b), (counts.get(keyOf(b)) ?? 0) + 1);
        track(upstream);
        upstream.setNoDelay(true);
        // Errors cut both sides; a clean close of one side ends the other after what is
        // buffered has been written (a response followed by `Connection: close` must arrive).
        upstream.on('error', () => client.destroy());
        client.on('error', () => upstream.destroy());
        upstream.once('close', () => client.end());
        client.once('close', () => upstream.end());
        if (client.destroyed) return upstream.destroy();
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
        return;
      }
      client.destroy(); // no backend accepted
    })();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  const shownHost = host.includes(':') ? `[${host}]` : host;

  return {
    host,
    port,
    url: `http://${shownHost}:${port}`,
    counts,
    setBackends(list) {
      backends = [...list];
    },
    async close() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of open) s.destroy();
      await closed;
    },
  };
}
