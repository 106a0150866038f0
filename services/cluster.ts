// `npm run cluster`: N gateway nodes (`phonebridge serve` child processes) on this machine
// behind our tiny round-robin TCP front (services/front.ts), sharing one Redis and one
// Postgres. For trying the cluster and for tests — production uses the Kubernetes
// Service/Ingress in front of the pods (docs/OPERATIONS.md).
//
//   npm run cluster -- [--nodes 3] [--port 8080] [--host 127.0.0.1] [--database-url postgres://…]
//                      [--redis-url redis://127.0.0.1:6379] [--redis-prefix pb:] [--data-dir DIR]
//                      [-- extra flags for every serve, e.g. --request-timeout-ms 5000]
//
// Flags mirror the PHONEBRIDGE_* environment like `serve`. Prints a JSON ready line on stdout
// ({"ready":true,"url":"<front>/mcp",…}); SIGINT/SIGTERM drains every node, then exits 0.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { startFront, type Front } from './front.ts';

const BIN = fileURLToPath(new URL('../bin/phonebridge.mjs', import.meta.url));

export interface ClusterOptions {
  nodes?: number;
  /** The front's address (the cluster's public URL). Port 0 picks a free one. */
  host?: string;
  port?: number;
  databaseUrl: string;
  redisUrl: string;
  redisPrefix?: string;
  /** Each node gets `<dataDir>/<nodeId>` (relay-info only: the store is Postgres). */
  dataDir: string;
  /** Node ids are `<idPrefix><i>` (1-based). Default `node-`. */
  idPrefix?: string;
  /** More `serve` flags for every node. */
  serveArgs?: string[];
  /** Extra environment for the node processes. */
  env?: Record<string, string>;
  /** Each non-JSON-ready stdout/stderr line of a node. Default: dropped. */
  onLog?: (nodeId: string, line: string) => void;
  /** A node exited (by itself or killed). */
  onExit?: (nodeId: string, code: number | null, signal: NodeJS.Signals | null) => void;
}

export interface ClusterNode {
  readonly id: string;
  readonly index: number;
  port: number;
  adminPort: number;
  /** http://127.0.0.1:<port> — the node directly, bypassing the front. */
  url: string;
  proc: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  get alive(): boolean;
  /** Sends a signal (SIGTERM drains, SIGKILL is kill -9) and resolves on exit. */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface Cluster {
  front: Front;
  /** The front, i.e. the cluster's public URL (what phones pair with and clients call). */
  url: string;
  nodes: ClusterNode[];
  /** Starts another node (or restarts node `index` after it exited) and adds it to the front. */
  startNode(index?: number): Promise<ClusterNode>;
  /** SIGTERM to every live node (each drains), SIGKILL after `graceMs`, then the front closes. */
  stop(graceMs?: number): Promise<void>;
}

export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const count = opts.nodes ?? 3;
  const idPrefix = opts.idPrefix ?? 'node-';
  const front = await startFront({ host: opts.host ?? '127.0.0.1', port: opts.port ?? 0 });
  const nodes: ClusterNode[] = [];

  const syncFront = () =>
    front.setBackends(nodes.filter((n) => n.alive).map((n) => ({ host: '127.0.0.1', port: n.port })));

  async function startNode(index = nodes.length + 1): Promise<ClusterNode> {
    const id = `${idPrefix}${index}`;
    const dataDir = join(opts.dataDir, id);
    mkdirSync(dataDir, { recursive: true });
    const args = [
      BIN,
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--admin-port',
      '0',
      '--public-url',
      front.url,
      '--data-dir',
      dataDir,
      '--database-url',
      opts.databaseUrl,
      '--redis-url',
      opts.redisUrl,
      ...(opts.redisPrefix ? ['--redis-prefix', opts.redisPrefix] : []),
      '--node-id',
      id,
      // Its stdin is a pipe from this process: if this process dies (even kill -9), the node drains and exits.
      '--exit-with-parent',
      ...(opts.serveArgs ?? []),
    ];
    const proc = spawn(process.execPath, args, {
      env: { ...process.env, ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      proc.once('exit', (code, signal) => {
        opts.onExit?.(id, code, signal);
        r({ code, signal });
        syncFront();
      }),
    );
    const tail: string[] = [];
    const log = (line: string) => {
      tail.push(line);
      if (tail.length > 20) tail.shift();
      opts.onLog?.(id, line);
    };
    createInterface({ input: proc.stderr }).on('line', log);
    const ready = new Promise<{ port: number; adminPort: number }>((resolveReady, reject) => {
      createInterface({ input: proc.stdout }).on('line', (line) => {
        if (line.startsWith('{"ready":')) {
          try {
            const j = JSON.parse(line) as { port: number; adminPort: number };
            return resolveReady(j);
          } catch {
            // not the ready line after all
          }
        }
        log(line);
      });
      void exited.then(({ code, signal }) =>
        reject(new Error(`node ${id} exited (${code ?? signal}) before ready: ${tail.slice(-5).join(' | ')}`)),
      );
    });
    const { port, adminPort } = await ready;
    const node: ClusterNode = {
      id,
      index,
      port,
      adminPort,
      url: `http://127.0.0.1:${port}`,
      proc,
      exited,
      get alive() {
        return proc.exitCode === null && proc.signalCode === null;
      },
      kill(signal = 'SIGTERM') {
        if (node.alive) proc.kill(signal);
        return exited;
      },
    };
    nodes[index - 1] = node;
    syncFront();
    return node;
  }

  try {
    await Promise.all(Array.from({ length: count }, (_, i) => startNode(i + 1)));
  } catch (err) {
    for (const n of nodes) void n?.kill('SIGKILL'); // resolves on exit, never rejects
    await front.close();
    throw err;
  }

  let stopping: Promise<void> | undefined;
  return {
    front,
    url: front.url,
    nodes,
    startNode,
    stop: (graceMs = 30_000) =>
      (stopping ??= (async () => {
        await Promise.all(
          nodes
            .filter((n) => n?.alive)
            .map(async (n) => {
              const timer = setTimeout(() => void n.kill('SIGKILL'), graceMs);
              await n.kill('SIGTERM');
              clearTimeout(timer);
            }),
        );
        await front.close();
      })()),
  };
}

/** The command line. */
export async function clusterMain(argv: string[]): Promise<void> {
  const dash = argv.indexOf('--');
  const own = dash < 0 ? argv : argv.slice(0, dash);
  const serveArgs = dash < 0 ? [] : argv.slice(dash + 1);
  const { values } = parseArgs({
    args: own,
    options: {
      nodes: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'database-url': { type: 'string' },
      'redis-url': { type: 'string' },
      'redis-prefix': { type: 'string' },
      'data-dir': { type: 'string' },
      quiet: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const env = process.env;
  if (values.help) {
    console.log(
      'npm run cluster -- [--nodes 3] [--port 8080] [--host 127.0.0.1] --database-url postgres://… [--redis-url redis://127.0.0.1:6379] [--redis-prefix pb:] [--data-dir ./.phonebridge-cluster] [--quiet] [-- serve flags]',
    );
    return;
  }
  const databaseUrl = values['database-url'] ?? env.PHONEBRIDGE_DATABASE_URL;
  if (!databaseUrl) {
    console.error(
      'phonebridge cluster: --database-url (or PHONEBRIDGE_DATABASE_URL) is required: every node shares one Postgres',
    );
    process.exit(64);
  }
  const nodes = Number(values.nodes ?? env.PHONEBRIDGE_CLUSTER_NODES ?? 3);
  if (!Number.isInteger(nodes) || nodes < 1) {
    console.error('phonebridge cluster: --nodes must be a positive integer');
    process.exit(64);
  }
  const portRaw = values.port ?? env.PHONEBRIDGE_PORT ?? '8080';
  const cluster = await startCluster({
    nodes,
    host: values.host ?? env.PHONEBRIDGE_HOST ?? '127.0.0.1',
    port: Number(portRaw),
    databaseUrl,
    redisUrl: values['redis-url'] ?? env.PHONEBRIDGE_REDIS_URL ?? 'redis://127.0.0.1:6379',
    redisPrefix: values['redis-prefix'] ?? env.PHONEBRIDGE_REDIS_PREFIX,
    dataDir: resolve(values['data-dir'] ?? env.PHONEBRIDGE_DATA_DIR ?? './.phonebridge-cluster'),
    serveArgs,
    onLog: values.quiet ? undefined : (id, line) => process.stderr.write(`[${id}] ${line}\n`),
    onExit: (id, code, signal) => {
      if (!shuttingDown) process.stderr.write(`[${id}] exited (${code ?? signal}); the front skips it\n`);
    },
  });
  let shuttingDown = false;
  const shutdown = async () => {
    if (shuttingDown) return;
    shuttingDown = true;
    process.stderr.write('cluster: draining every node…\n');
    await cluster.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
  process.stderr.write(
    `cluster: ${nodes} node(s) behind ${cluster.url} (front for testing only)\n` +
      cluster.nodes.map((n) => `  ${n.id}: ${n.url} (admin :${n.adminPort}, pid ${n.proc.pid})\n`).join('') +
      `  MCP endpoint: ${cluster.url}/mcp\n` +
      `  pair a phone: phonebridge pair --json --database-url <same> --public-url ${cluster.url}\n`,
  );
  console.log(
    JSON.stringify({
      ready: true,
      url: `${cluster.url}/mcp`,
      front: cluster.url,
      nodes: cluster.nodes.map((n) => ({
        id: n.id,
        url: n.url,
        port: n.port,
        adminPort: n.adminPort,
        pid: n.proc.pid,
      })),
    }),
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  clusterMain(process.argv.slice(2)).catch((err) => {
    console.error(`phonebridge cluster: ${(err as Error).message}`);
    process.exit(1);
  });
}
