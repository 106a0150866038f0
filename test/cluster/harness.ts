// Cluster test harness: real node processes (services/cluster.ts) behind our round-robin
// front, real Redis (a fresh key prefix per cluster) and real Postgres (a fresh database per
// cluster, dropped at the end), real phones (DeviceAgent + the echo MCP server) and raw HTTP
// or the official SDK client. Nothing of ours is mocked.
import { dropPrefix } from '../../src/bus/redis/test-support.ts';
import { connectorFor } from '../../src/bus/redis/connector.ts';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Redis } from 'ioredis';
import { Agent, request as httpRequest } from 'node:http';
import { startCluster, type Cluster, type ClusterNode, type ClusterOptions } from '../../services/cluster.ts';
import { createKey, createPairing } from '../../src/provisioning.ts';
import { openStore, type OpenStore } from '../../src/store/index.ts';
import { DeviceAgent, silentLogger, type DeviceAgentOptions } from '../../src/device/agent/index.ts';
import { saveIdentity } from '../../src/device/agent/state.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';
import type { Tracing } from '../../src/observability/tracing.ts';
import {
  createDatabase as scratchDatabase,
  PG_ADMIN_URL,
  type ScratchDatabase,
} from '../../loadtest/lib/scratch-database.ts';

import { waitFor } from '../helpers/relay.ts';

export { waitFor };

export const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export { PG_ADMIN_URL };

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A fresh Postgres database; `drop()` removes it (closing whatever still uses it). */
export const createDatabase = (): Promise<ScratchDatabase> => scratchDatabase('pb_cluster');

export interface ClusterPhone {
  agent: DeviceAgent;
  deviceId: string;
  /** The agent's state dir (key and identity), for starting a second instance of this phone. */
  stateDir: string;
  control: EchoServerControl;
  /** Close codes the phone saw, in order. */
  closes: number[];
  stop(): Promise<void>;
}

export interface TestCluster {
  cluster: Cluster;
  /** The front: what phones pair with and clients may call. */
  url: string;
  nodes: ClusterNode[];
  databaseUrl: string;
  prefix: string;
  /** Where ownership keys live (`prefix` on one Redis and Sentinel, its hash tag on a cluster). */
  ownPrefix: string;
  store: OpenStore;
  /** A client of the cluster's Redis topology (one Redis, Sentinel or Redis Cluster). */
  redis: Redis;
  /** Pairs a phone through the front; with `node`, it then connects to that node directly. */
  phone(opts?: {
    node?: ClusterNode;
    name?: string;
    control?: EchoServerControl;
    tracing?: Tracing;
    /** Where the phone connects instead of `node` (a fault-injecting proxy in front of a node). */
    relay?: string;
    pingIntervals?: DeviceAgentOptions['pingIntervals'];
  }): Promise<ClusterPhone>;
  key(deviceId: string): Promise<string>;
  /** The node id holding the device's socket per the bus, if any. */
  ownerOf(deviceId: string): Promise<string | undefined>;
  node(id: string): ClusterNode;
  stop(): Promise<void>;
}

export async function startTestCluster(
  opts: {
    nodes?: number;
    redisUrl?: string;
    serveArgs?: string[];
    log?: boolean;
    /** What the nodes dial for Redis, when not `redisUrl` itself (a fault-injecting proxy in front of it). */
    nodeRedisUrl?: string;
    /** The nodes' database URL made from the test's own (e.g. the same database through a proxy). */
    nodeDatabaseUrl?: (url: string) => string;
  } & Partial<Pick<ClusterOptions, 'env' | 'onLog'>> = {},
): Promise<TestCluster> {
  const db = await createDatabase();
  const prefix = `pbc:${randomBytes(4).toString('hex')}:`;
  const dir = mkdtempSync(join(tmpdir(), 'pb-cl-'));
  const redisUrl = opts.redisUrl ?? REDIS_URL;
  let cluster: Cluster;
  try {
    cluster = await startCluster({
      nodes: opts.nodes ?? 3,
      databaseUrl: opts.nodeDatabaseUrl?.(db.url) ?? db.url,
      redisUrl: opts.nodeRedisUrl ?? redisUrl,
      redisPrefix: prefix,
      dataDir: dir,
      serveArgs: ['--log-level', opts.log ? 'info' : 'warn', '--drain-ms', '5000', ...(opts.serveArgs ?? [])],
      env: opts.env,
      onLog:
        opts.onLog ??
        (opts.log || process.env.PB_TEST_LOG ? (id, line) => process.stderr.write(`[${id}] ${line}\n`) : undefined),
    });
  } catch (err) {
    await db.drop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const store = await openStore({ dataDir: dir, databaseUrl: db.url, role: 'cli' });
  // Through the bus's own connector: the same topology and key layout the nodes use.
  const connector = connectorFor(redisUrl, prefix);
  const redis = connector.client('cmd', {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 100,
  }) as Redis;
  redis.on('error', () => {});
  await redis.connect();
  const phones: ClusterPhone[] = [];

  const tc: TestCluster = {
    cluster,
    url: cluster.url,
    nodes: cluster.nodes,
    databaseUrl: db.url,
    prefix,
    ownPrefix: connector.layout.own,
    store,
    redis,
    async phone(o = {}) {
      const stateDir = mkdtempSync(join(dir, 'phone-'));
      const name = o.name ?? 'cluster phone';
      const qr = await createPairing(store.store, { relay: cluster.url, name });
      const identity = await DeviceAgent.pair({ stateDir, qr, name, log: silentLogger });
      const relay = o.relay ?? o.node?.url;
      if (relay) saveIdentity(stateDir, { ...identity, relay }); // same relay_host: signatures still bind the front
      const control = o.control ?? { calls: [], cancellations: 0 };
      const agent = new DeviceAgent({
        stateDir,
        createServer: () => createEchoServer(control),
        log: silentLogger,
        backoff: { baseMs: 50, capMs: 500 },
        drainJitterMs: 200,
        tracing: o.tracing,
        pingIntervals: o.pingIntervals,
      });
      const closes: number[] = [];
      agent.on('disconnected', (e) => closes.push(e.code));
      agent.start();
      const phone: ClusterPhone = {
        agent,
        deviceId: identity.device_id,
        stateDir,
        control,
        closes,
        stop: () => agent.stop(),
      };
      phones.push(phone);
      await waitFor(
        async () => (await tc.ownerOf(identity.device_id)) !== undefined,
        15_000,
        'phone claimed on a node',
      );
      return phone;
    },
    key: async (deviceId) => (await createKey(store.store, deviceId)).token,
    async ownerOf(deviceId) {
      const node = await redis.hget(`${connector.layout.own}dev:${deviceId}`, 'node');
      return node ?? undefined;
    },
    node(id) {
      const n = cluster.nodes.find((x) => x.id === id);
      if (!n) throw new Error(`no node ${id}`);
      return n;
    },
    async stop() {
      await Promise.all(phones.map((p) => p.agent.stop().catch(() => {})));
      await cluster.stop(5000).catch(() => {});
      await store.close().catch(() => {});
      // Topologies other than one Redis are started and removed by their tests.
      if (connector.topology.kind === 'single') await dropPrefix(prefix, redisUrl).catch(() => {});
      redis.disconnect();
      await db.drop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return tc;
}

// --- raw MCP over HTTP (keep-alive), for load and for precise assertions ---------------------

export interface RawClient {
  /** A session initialized on `base` (any node or the front). */
  readonly sessionId: string;
  /** A new session (what a client does after a 404). */
  initialize(base: string): Promise<string>;
  post(
    base: string,
    body: unknown,
    opts?: { signal?: AbortSignal; headers?: Record<string, string>; noSession?: boolean },
  ): Promise<{ status: number; headers: Record<string, string>; text: string; json: any }>;
  call(
    base: string,
    id: number | string,
    name: string,
    args: Record<string, unknown>,
    opts?: { signal?: AbortSignal },
  ): Promise<any>;
  close(): Promise<void>;
}

export const PROTOCOL = '2025-11-25';

export async function rawClient(base: string, token: string, opts: { maxSockets?: number } = {}): Promise<RawClient> {
  const agent = new Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 16 });
  const baseHeaders = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'x-api-key': token,
  };
  let sessionId = '';
  const post: RawClient['post'] = (b, body, o = {}) =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string> = {
        ...baseHeaders,
        ...(sessionId && !o.noSession ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL } : {}),
        ...o.headers,
      };
      const payload = JSON.stringify(body);
      const req = httpRequest(
        `${b}/mcp`,
        {
          method: 'POST',
          headers: { ...headers, 'content-length': String(Buffer.byteLength(payload)) },
          agent,
          signal: o.signal,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const ct = String(res.headers['content-type'] ?? '');
            let json: any;
            try {
              if (ct.includes('application/json') && text) json = JSON.parse(text);
              else if (ct.includes('text/event-stream')) json = lastSseMessage(text);
            } catch (err) {
              // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on what the parser threw
              return reject(err);
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, string>, text, json });
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  const initialize = async (b: string) => {
    const init = await post(
      b,
      {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      },
      { noSession: true },
    );
    if (init.status !== 200) throw new Error(`initialize failed: ${init.status} ${init.text}`);
    sessionId = String(init.headers['mcp-session-id']);
    return sessionId;
  };
  await initialize(base);
  return {
    get sessionId() {
      return sessionId;
    },
    initialize,
    post,
    async call(b, id, name, args, o) {
      const r = await post(b, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, o);
      if ((r.status !== 200 && !r.json) || r.status === 404) throw new HttpError(r.status, r.text);
      return r.json;
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- the same close(): Promise<void> as every other client handle
    async close() {
      agent.destroy();
    },
  };
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`HTTP ${status}: ${body.slice(0, 200)}`);
  }
}

/** The last `data:` message of an SSE body. */
export function lastSseMessage(text: string): any {
  const datas = text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim())
    .filter(Boolean);
  return datas.length ? JSON.parse(datas[datas.length - 1]) : undefined;
}

/** The text of a tools/call result from a raw answer, or the error's data.code. */
export function outcome(answer: any): string {
  if (answer?.error) return `error:${answer.error.data?.code ?? answer.error.code}`;
  return answer?.result?.content?.[0]?.text ?? `?${JSON.stringify(answer)}`;
}

/** outcome(), with the error's message: what a failed assertion needs to name the path that gave up. */
export function outcomeWithReason(answer: any): string {
  const o = outcome(answer);
  return answer?.error ? `${o} (${answer.error.message})` : o;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// --- load with a record of every call -----------------------------------------------------------

export interface CallRecord {
  start: number;
  end: number;
  /** The echoed text, `error:<data.code>`, or `http:<message>` for a transport failure. */
  outcome: string;
  ok: boolean;
  expected: string;
  /** The error message, for failures. */
  detail?: string;
}

/**
 * Runs `loops` concurrent call loops until `stop()` is called. Each call is a tools/call of
 * `echo` (or `sleep` when sleepMs is given, answered with `slept <ms>`) on `target(i)`.
 */
export function runLoad(opts: {
  client: RawClient;
  loops: number;
  target: (loop: number, n: number) => string;
  sleepMs?: (n: number) => number;
  pauseAfterErrorMs?: number;
  tag?: string;
  reinitialize?: boolean;
}) {
  const records: CallRecord[] = [];
  let stopped = false;
  let n = 0;
  const tag = opts.tag ?? 'load';
  const loops = Array.from({ length: opts.loops }, async (_, loop) => {
    while (!stopped) {
      const i = n++;
      const ms = opts.sleepMs?.(i);
      const expected = ms === undefined ? `${tag}#${i}` : `slept ${ms}`;
      const start = Date.now();
      let got: string;
      let detail: string | undefined;
      try {
        const answer =
          ms === undefined
            ? await opts.client.call(opts.target(loop, i), i, 'echo', { text: expected })
            : await opts.client.call(opts.target(loop, i), i, 'sleep', { ms });
        got = outcome(answer);
        detail = answer?.error?.message;
      } catch (err) {
        got = `http:${(err as Error).message}`;
        if (err instanceof HttpError && err.status === 404 && opts.reinitialize) {
          got = 'session_lost';
          await opts.client.initialize(opts.target(loop, i)).catch(() => {});
        }
      }
      const rec: CallRecord = { start, end: Date.now(), outcome: got, ok: got === expected, expected, detail };
      records.push(rec);
      if (!rec.ok && opts.pauseAfterErrorMs) await sleep(opts.pauseAfterErrorMs);
    }
  });
  return {
    records,
    ok: () => records.filter((r) => r.ok).length,
    async stop() {
      stopped = true;
      await Promise.all(loops);
      return records;
    },
  };
}
