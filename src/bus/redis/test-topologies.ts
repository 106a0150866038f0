// Real Redis topologies for tests, started from the system's redis-server on fixed local ports
// (data nodes 7000–7099, sentinels 26380–26399; each test file takes its own block):
//   - Sentinel: a master, a replica, three sentinels (`redis-server --sentinel`);
//   - Cluster: three masters with one replica each (`redis-cli --cluster create`).
// No persistence, a temp --dir each; stop() kills every process and removes the dirs.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { waitFor } from './test-support.ts';

const run = promisify(execFile);

class Proc {
  readonly dir: string;
  private child?: ChildProcess;
  constructor(
    readonly port: number,
    private readonly args: (dir: string) => string[],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), `pb-redis-${port}-`));
  }
  start(): void {
    this.child = spawn('redis-server', this.args(this.dir), { stdio: 'ignore', cwd: this.dir });
  }
  get running(): boolean {
    const c = this.child;
    return !!c && c.exitCode === null && c.signalCode === null;
  }
  async kill(): Promise<void> {
    const c = this.child;
    if (!c || !this.running) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  }
  async remove(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function dataNode(port: number, extra: string[] = []): Proc {
  return new Proc(port, (dir) => [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    ...extra,
  ]);
}

/** PING answers (or `check` holds) on 127.0.0.1:port. */
async function ready(port: number, check?: (r: Redis) => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const r = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    retryStrategy: () => 50,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
  });
  r.on('error', () => {});
  try {
    await r.connect().catch(() => {});
    await waitFor(
      async () => {
        try {
          if ((await r.ping()) !== 'PONG') return false;
          return check ? await check(r) : true;
        } catch {
          return false;
        }
      },
      timeoutMs,
      `redis on port ${port}`,
    );
  } finally {
    r.disconnect();
  }
}

/** Runs one command on 127.0.0.1:port and disconnects. */
export async function at<T>(port: number, f: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    return await f(r);
  } finally {
    r.disconnect();
  }
}

export interface SentinelTopology {
  url: string;
  masterName: string;
  /** The port of the current master, as the sentinels see it. */
  masterPort(): Promise<number>;
  /** kill -9 the current master; resolves with its port. */
  killMaster(): Promise<number>;
  stop(): Promise<void>;
}

/** Master on `base`, replica on `base + 1`, sentinels on `sentinelBase` … `+ 2`. */
export async function startSentinel(
  base: number,
  sentinelBase: number,
  masterName = 'pbmaster',
): Promise<SentinelTopology> {
  const master = dataNode(base);
  const replica = dataNode(base + 1, ['--replicaof', '127.0.0.1', String(base)]);
  const sentinels = [0, 1, 2].map(
    (i) =>
      new Proc(sentinelBase + i, (dir) => {
        const conf = join(dir, 'sentinel.conf');
        writeFileSync(
          conf,
          [
            `port ${sentinelBase + i}`,
            'bind 127.0.0.1',
            `dir ${dir}`,
            `sentinel monitor ${masterName} 127.0.0.1 ${base} 2`,
            `sentinel down-after-milliseconds ${masterName} 1000`,
            `sentinel failover-timeout ${masterName} 4000`,
            `sentinel parallel-syncs ${masterName} 1`,
            '',
          ].join('\n'),
        );
        return [conf, '--sentinel'];
      }),
  );
  const all = [master, replica, ...sentinels];
  const stop = async () => {
    await Promise.all(all.map((p) => p.remove()));
  };
  try {
    master.start();
    replica.start();
    await ready(master.port);
    await ready(replica.port, async (r) => /master_link_status:up/.test(await r.info('replication')));
    for (const s of sentinels) s.start();
    // Each sentinel knows the replica and the two other sentinels: a failover can be agreed on.
    for (const s of sentinels)
      await ready(s.port, async (r) => {
        const replicas = (await r.call('SENTINEL', 'REPLICAS', masterName)) as unknown[];
        const peers = (await r.call('SENTINEL', 'SENTINELS', masterName)) as unknown[];
        return replicas.length === 1 && peers.length === 2;
      });
  } catch (err) {
    await stop();
    throw err;
  }
  const masterPort = async () => {
    for (const s of sentinels) {
      if (!s.running) continue;
      const addr = await at(s.port, (r) => r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)).catch(() => null);
      if (Array.isArray(addr)) return Number(addr[1]);
    }
    throw new Error('no sentinel answers');
  };
  return {
    url: `redis+sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${masterName}`,
    masterName,
    masterPort,
    async killMaster() {
      const port = await masterPort();
      await all.find((p) => p.port === port)!.kill();
      return port;
    },
    stop,
  };
}

export interface ClusterTopology {
  url: string;
  ports: number[];
  /** Ports of the masters now, from CLUSTER NODES on a live node. */
  masters(): Promise<number[]>;
  /** kill -9 one master; resolves with its port. */
  kill(port: number): Promise<void>;
  /** cluster_state:ok on every live node, and every slot served by a live master. */
  healthy(): Promise<boolean>;
  stop(): Promise<void>;
}

/** Six nodes on base … base + 5: three masters, one replica each. */
export async function startCluster(base: number): Promise<ClusterTopology> {
  const nodes = [0, 1, 2, 3, 4, 5].map((i) =>
    dataNode(base + i, [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      '1000',
    ]),
  );
  const stop = async () => {
    await Promise.all(nodes.map((p) => p.remove()));
  };
  const live = () => nodes.filter((n) => n.running);
  const healthy = async () => {
    for (const n of live()) {
      const info = await at(n.port, (r) => r.cluster('INFO')).catch(() => '');
      if (!/cluster_state:ok/.test(String(info))) return false;
    }
    const any = live()[0];
    const slots = (await at(any.port, (r) => r.cluster('SLOTS')).catch(() => [])) as Array<
      [number, number, [string, number]]
    >;
    const alive = new Set(live().map((n) => n.port));
    let covered = 0;
    for (const [from, to, [, port]] of slots) if (alive.has(Number(port))) covered += to - from + 1;
    return covered === 16384;
  };
  try {
    for (const n of nodes) n.start();
    for (const n of nodes) await ready(n.port);
    await run('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ]);
    // Every replica synced too: a failover then has a replica to promote.
    await waitFor(
      async () => {
        if (!(await healthy())) return false;
        for (const n of nodes) {
          const info = await at(n.port, (r) => r.info('replication'));
          if (/role:slave/.test(info) && !/master_link_status:up/.test(info)) return false;
        }
        return true;
      },
      30_000,
      'cluster formed',
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `redis+cluster://${nodes
      .slice(0, 3)
      .map((n) => `127.0.0.1:${n.port}`)
      .join(',')}`,
    ports: nodes.map((n) => n.port),
    async masters() {
      const text = String(await at(live()[0].port, (r) => r.cluster('NODES')));
      return text
        .split('\n')
        .filter((l) => / master /.test(l.replace(/,/g, ' ')) && !/fail/.test(l))
        .map((l) => Number(/:(\d+)@/.exec(l)![1]));
    },
    async kill(port) {
      await nodes.find((n) => n.port === port)!.kill();
    },
    healthy,
    stop,
  };
}
