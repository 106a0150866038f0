// What crossing nodes costs, measured in ONE run on one machine: two `phonebridge serve`
// processes (A, B) on real Redis and Postgres, one phone on A, one MCP session. The same
// tools/call is sent to A (same node as the phone) and to B (B → Redis → A → phone and back).
//
//   node --import tsx loadtest/cluster-latency.ts [--calls 2000] [--concurrency 32] [--seconds 6]
//        [--redis-url redis://127.0.0.1:6379] [--admin-database-url postgres://postgres@127.0.0.1:5432/postgres]
//
// Latency: sequential calls alternating A, B, A, B… (so drift hits both alike): p50/p99 each,
// and the difference (target: cross-node p50 adds < 0.5 ms). Throughput: `concurrency` calls in
// flight for `seconds`, in alternating half-second rounds A, B, A, B…; cross-node as a fraction of same-node
// (target ≥ 0.5). Raw HTTP/1.1 keep-alive POSTs against one session, not the SDK client, so
// the client is not the bottleneck. The phone is a minimal MCP server in a worker thread (its
// answer costs microseconds) so the relay path is what is measured. 127.0.0.1 only.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Redis } from 'ioredis';
import { startCluster } from '../services/cluster.ts';
import { dropPrefix } from '../src/bus/redis/test-support.ts';
import { createKey, createPairing } from '../src/provisioning.ts';
import { openStore } from '../src/store/index.ts';
import {
  decodeNonce,
  generateDeviceKey,
  loadPrivateKey,
  signDevicePayload,
  signedPayload,
} from '../src/crypto/device-auth.ts';

interface PhoneJob {
  /** ws:// URL of /device/ws on the node the phone should hold its socket to. */
  url: string;
  headers: Record<string, string>;
  /** Where `ws` resolves from. */
  requireFrom: string;
}

// --- the phone (a worker thread, plain JS: answers in microseconds) ----------------------------

const PHONE_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const WebSocket = require('node:module').createRequire(workerData.requireFrom)('ws');
const ws = new WebSocket(workerData.url, { headers: workerData.headers, perMessageDeflate: false });
ws.on('message', (data) => {
  const m = JSON.parse(data.toString());
  if (m.id === undefined || !m.method) return;
  let result;
  if (m.method === 'initialize') result = { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'latency-phone', version: '1' } };
  else if (m.method === 'tools/list') result = { tools: [{ name: 'echo', inputSchema: { type: 'object' }, _meta: { 'phonebridge/scope': 'devices:read' } }] };
  else if (m.method === 'tools/call') result = { content: [{ type: 'text', text: String((m.params && m.params.arguments && m.params.arguments.text) || '') }] };
  else result = {};
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
});
ws.on('open', () => parentPort.postMessage({ open: true }));
ws.on('close', (code) => parentPort.postMessage({ closed: code }));
ws.on('error', (err) => parentPort.postMessage({ error: err.message }));
`;

/** Pairs through the front, signs a challenge from `node`, and starts the phone's socket there. */
async function startPhone(front: string, node: string, code: string): Promise<{ deviceId: string; worker: Worker }> {
  const key = generateDeviceKey();
  const post = async (url: string, body: unknown) => {
    const r = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (r.status !== 200) throw new Error(`${url}: HTTP ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, string>;
  };
  const paired = await post(`${front}/pair`, { code, public_key: key.publicKeySpkiBase64, name: 'latency phone' });
  const { nonce } = await post(`${node}/device/challenge`, { device_id: paired.device_id });
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = signDevicePayload(
    loadPrivateKey(key.privateKeyPem),
    signedPayload(decodeNonce(nonce)!, paired.relay_host, ts),
  );
  const job: PhoneJob = {
    url: `${node.replace(/^http/, 'ws')}/device/ws`,
    headers: {
      'X-Device-Id': paired.device_id,
      'X-Device-Nonce': nonce,
      'X-Device-Ts': ts,
      'X-Device-Sig': sig,
      'X-Device-App': 'latency-phone/1',
    },
    requireFrom: fileURLToPath(import.meta.url),
  };
  const worker = new Worker(PHONE_SOURCE, { eval: true, workerData: job });
  await new Promise<void>((resolve, reject) => {
    worker.once('message', (m: { open?: boolean }) => (m.open ? resolve() : reject(new Error(JSON.stringify(m)))));
    worker.once('error', reject);
  });
  return { deviceId: paired.device_id, worker };
}

// --- the client and the measurement (main thread) -------------------------------------------------

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function rawSession(agent: Agent, token: string) {
  let sessionId = '';
  const post = (base: string, body: string) =>
    new Promise<string>((resolve, reject) => {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-api-key': token,
        'content-length': String(Buffer.byteLength(body)),
      };
      if (sessionId) Object.assign(headers, { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' });
      const req = httpRequest(`${base}/mcp`, { method: 'POST', headers, agent }, (res) => {
        if (res.headers['mcp-session-id']) sessionId = String(res.headers['mcp-session-id']);
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          res.statusCode === 200
            ? resolve(Buffer.concat(chunks).toString())
            : reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString()}`)),
        );
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  let id = 0;
  return {
    initialize: (base: string) =>
      post(
        base,
        JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'latency', version: '1' } },
        }),
      ),
    async call(base: string): Promise<void> {
      const n = ++id;
      const text = `c${n}`;
      const answer = await post(
        base,
        `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"echo","arguments":{"text":"${text}"}}}`,
      );
      if (!answer.includes(`"text":"${text}"`) || !answer.includes(`"id":${n}`))
        throw new Error(`wrong answer: ${answer.slice(0, 200)}`);
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      calls: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '32' },
      seconds: { type: 'string', default: '6' },
      'redis-url': { type: 'string', default: process.env.PHONEBRIDGE_REDIS_URL ?? 'redis://127.0.0.1:6379' },
      'admin-database-url': {
        type: 'string',
        default: process.env.PHONEBRIDGE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
      },
    },
  });
  const CALLS = Number(values.calls);
  const CONCURRENCY = Number(values.concurrency);
  const SECONDS = Number(values.seconds);
  const hardStop = setTimeout(() => {
    console.error('cluster-latency: gave up after 5 minutes');
    process.exit(1);
  }, 5 * 60_000);
  hardStop.unref();

  const dbName = `pb_latency_${randomBytes(4).toString('hex')}`;
  const adminUrl = values['admin-database-url'];
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    await c.query(sql).finally(() => c.end());
  };
  await admin(`create database ${dbName}`);
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;
  const prefix = `pblat:${randomBytes(4).toString('hex')}:`;
  const dir = mkdtempSync(join(tmpdir(), 'pb-lat-'));
  const redis = new Redis(values['redis-url']);
  const cluster = await startCluster({
    nodes: 2,
    databaseUrl: dbUrl.toString(),
    redisUrl: values['redis-url'],
    redisPrefix: prefix,
    dataDir: dir,
    serveArgs: ['--log-level', 'warn'],
  });
  const [A, B] = cluster.nodes;
  const store = await openStore({ dataDir: dir, databaseUrl: dbUrl.toString(), role: 'cli' });
  let worker: Worker | undefined;
  try {
    const qr = await createPairing(store.store, { relay: cluster.url });
    const phone = await startPhone(cluster.url, A.url, qr.code);
    worker = phone.worker;
    const deviceId = phone.deviceId;
    for (let i = 0; i < 200 && (await redis.hget(`${prefix}dev:${deviceId}`, 'node')) !== A.id; i++)
      await new Promise((r) => setTimeout(r, 25));
    const token = (await createKey(store.store, deviceId)).token;
    const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    const client = rawSession(agent, token);
    await client.initialize(A.url);

    // Warm-up: JIT, connection pools, Redis scripts loaded on both nodes.
    for (let i = 0; i < 300; i++) await client.call(i % 2 ? B.url : A.url);

    // Latency: sequential, interleaved; a Redis PING between calls calibrates the machine
    // (crossing nodes adds two Redis pub/sub hops: B → Redis → A, A → Redis → B).
    const lat = { same: [] as number[], cross: [] as number[], ping: [] as number[] };
    for (let i = 0; i < 2 * CALLS; i++) {
      const cross = i % 2 === 1;
      const t0 = process.hrtime.bigint();
      await client.call(cross ? B.url : A.url);
      (cross ? lat.cross : lat.same).push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (cross) {
        const t1 = process.hrtime.bigint();
        await redis.ping();
        lat.ping.push(Number(process.hrtime.bigint() - t1) / 1e6);
      }
    }
    lat.same.sort((a, b) => a - b);
    lat.cross.sort((a, b) => a - b);
    lat.ping.sort((a, b) => a - b);

    // Throughput: concurrent, in short alternating rounds (half a second each) so that load
    // from elsewhere on the machine hits both paths alike.
    const done = { same: 0, cross: 0 };
    const rounds = Math.max(4, 2 * Math.round(SECONDS));
    const roundMs = (SECONDS * 1000) / rounds;
    for (let round = 0; round < rounds; round++) {
      const cross = round % 2 === 1;
      const until = Date.now() + roundMs;
      const base = cross ? B.url : A.url;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (Date.now() < until) {
            await client.call(base);
            done[cross ? 'cross' : 'same']++;
          }
        }),
      );
    }
    const rate = { same: done.same / (SECONDS / 2), cross: done.cross / (SECONDS / 2) };

    const p = (xs: number[], q: number) => percentile(xs, q).toFixed(3);
    const added50 = percentile(lat.cross, 50) - percentile(lat.same, 50);
    const added99 = percentile(lat.cross, 99) - percentile(lat.same, 99);
    const fraction = rate.cross / rate.same;
    console.log(
      `cluster-latency: 2 nodes, 1 phone on ${A.id}, ${CALLS} sequential calls per path, ${CONCURRENCY} concurrent for ${SECONDS} s`,
    );
    console.log(
      `  same node  (client → ${A.id} → phone):            p50 ${p(lat.same, 50)} ms  p99 ${p(lat.same, 99)} ms  ${Math.round(rate.same)} calls/s`,
    );
    console.log(
      `  cross node (client → ${B.id} → Redis → ${A.id} → phone): p50 ${p(lat.cross, 50)} ms  p99 ${p(lat.cross, 99)} ms  ${Math.round(rate.cross)} calls/s`,
    );
    console.log(
      `  Redis PING from the client, same run (one hop, for scale): p50 ${p(lat.ping, 50)} ms  p99 ${p(lat.ping, 99)} ms`,
    );
    console.log(
      `  added by crossing: p50 +${added50.toFixed(3)} ms (target < 0.5) ${added50 < 0.5 ? 'PASS' : 'MISS'}, p99 +${added99.toFixed(3)} ms; throughput ${(fraction * 100).toFixed(0)}% of same-node (target ≥ 50%) ${fraction >= 0.5 ? 'PASS' : 'MISS'}`,
    );
    console.log(
      JSON.stringify({
        same: { p50: percentile(lat.same, 50), p99: percentile(lat.same, 99), rps: rate.same },
        cross: { p50: percentile(lat.cross, 50), p99: percentile(lat.cross, 99), rps: rate.cross },
        addedP50: added50,
        addedP99: added99,
        throughputFraction: fraction,
        redisPingP50: percentile(lat.ping, 50),
      }),
    );
    agent.destroy();
  } finally {
    await worker?.terminate();
    await cluster.stop(5000);
    await store.close();
    redis.disconnect();
    await dropPrefix(prefix, values['redis-url']);
    await admin(`drop database if exists ${dbName} with (force)`);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
