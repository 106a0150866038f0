// `node --import tsx loadtest/relay-overhead.ts [--out DIR] [--rounds N] [--round-ms MS] [--redis-url URL]… [--runs N]`
// (`npm run loadtest -- relay-overhead` runs it as a child with the common flags mapped onto
// these and writes the runner's report.json, report.md and charts: loadtest/relay-overhead-scenario.ts): what the relay
// costs per call, side by side in one run with alternating rounds (docs/BENCHMARKS.md, "Relay
// overhead"; docs/decisions/0050-one-write-per-answer.md):
//   relay     phonebridge (the same startRelay as `serve`, embedded store), a child process
//   baseline  the protocol written the obvious way (loadtest/baseline/relay.ts: node:http + ws)
//   direct    the phone's MCP server answering Streamable HTTP itself (the floor)
//   cluster   two phonebridge nodes over Redis + Postgres, the client on the node without the phone
// Per target: closed-loop calls/s, p50/p99 at a fixed arrival rate of half the baseline's peak
// (open loop: latency counted from each call's scheduled start), server CPU µs per call
// (every thread's schedstat: lib/proc-cpu.ts), send syscalls per call (strace -c, when
// installed) and 256 KiB answers in MB/s. Four processes: the targets, one phone process (the reference agent, one socket per
// relay, plus the direct server), one load generator, and this one. 127.0.0.1 only; bounded.
// Exits non-zero when a target of docs/BENCHMARKS.md is missed; writes DIR/report.json.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { forkChild, serveParent } from './lib/ipc-child.ts';
import { cpuLimit } from './lib/cpu-limit.ts';
import { mainThreadCpuTimeUs, processCpuTimeUs, processCpuUs } from './lib/proc-cpu.ts';
import { traceCalls } from './lib/strace.ts';
import { perCall, redisCounter, type RedisCounter } from './lib/redis-commands.ts';
import { probedSession } from './lib/probed-session.ts';
import { createDatabase } from './lib/scratch-database.ts';
import { checkLine, medianChecks, meets } from './lib/runs.ts';

const SELF = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const REVISION = '2025-11-25';
// A 256 KiB answer: the text plus its JSON-RPC envelope within the 256 KiB frame limit.
const BLOB_BYTES = 256 * 1024 - 256;
const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

type Json = any;

// ---- the phone process: reference agents (one per relay) and the direct server ----------

async function phoneMain(): Promise<void> {
  const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const { DeviceAgent, silentLogger } = await import('../src/device/agent/index.ts');
  const { z } = await import('zod');
  const blob = 'x'.repeat(BLOB_BYTES);
  const scope = { 'phonebridge/scope': 'devices:read' };
  const mcpServer = () => {
    const s = new McpServer({ name: 'bench-phone', version: '1.0.0' }, { capabilities: { tools: {} } });
    s.registerTool('echo', { inputSchema: { text: z.string() }, _meta: scope }, (a) => ({
      content: [{ type: 'text', text: a.text }],
    }));
    s.registerTool('blob', { inputSchema: {}, _meta: scope }, () => ({
      content: [{ type: 'text', text: blob }],
    }));
    return s;
  };
  const dir = mkdtempSync(join(tmpdir(), 'pb-overhead-phone-'));
  const agents: Array<InstanceType<typeof DeviceAgent>> = [];
  // The direct path: the same server over Streamable HTTP, one transport per session.
  const transports = new Map<string, InstanceType<typeof StreamableHTTPServerTransport>>();
  const direct = createServer((req, res) => {
    const sid = req.headers['mcp-session-id'];
    let t = typeof sid === 'string' ? transports.get(sid) : undefined;
    if (!t) {
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomBytes(16).toString('hex'),
        enableJsonResponse: true,
        onsessioninitialized: (id) => void transports.set(id, created),
      });
      void mcpServer().connect(created);
      t = created;
    }
    void t.handleRequest(req, res);
  });
  direct.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => direct.listen(0, '127.0.0.1', r));
  serveParent({
    async pair(m) {
      const stateDir = join(dir, `s${agents.length}`);
      const identity = await DeviceAgent.pair({ stateDir, qr: m.qr, name: 'bench phone', log: silentLogger });
      const agent = new DeviceAgent({ stateDir, createServer: mcpServer, log: silentLogger });
      const connected = new Promise<void>((r) => agent.once('connected', () => r()));
      agent.start();
      await connected;
      agents.push(agent);
      return identity.device_id;
    },
  });
  process.on('SIGTERM', () => {
    void Promise.all(agents.map((a) => a.stop())).finally(() => {
      rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    });
  });
  process.send!({ type: 'ready', directUrl: `http://127.0.0.1:${(direct.address() as { port: number }).port}/mcp` });
}

// ---- the load generator ---------------------------------------------------------------

interface Job {
  url: string;
  headers: Record<string, string>;
  tool: 'echo' | 'blob';
  ms: number;
  conns?: number;
  rate?: number;
  /** Each echo call's text differs (`hi-<id>`): no request repeats the last but for its id. */
  distinctArgs?: boolean;
}

interface JobResult {
  calls: number;
  errors: number;
  ms: number;
  bytes: number;
  p50: number;
  p99: number;
  cpuUs: number;
}

const cpuUs = processCpuTimeUs;

function loadMain(): Promise<void> {
  serveParent({ run: (m) => runJob(m.job as Job) });
  return Promise.resolve();
}

async function runJob(job: Job): Promise<JobResult> {
  const u = new URL(job.url);
  const agent = new Agent({ keepAlive: true, maxSockets: job.conns ?? 256 });
  const args = job.tool === 'echo' ? '{"text":"hi"}' : '{}';
  let id = 1;
  let errors = 0;
  let bytes = 0;
  const once = (): Promise<void> =>
    new Promise((resolve) => {
      const n = id++;
      const callArgs = job.distinctArgs ? `{"text":"hi-${n}"}` : args;
      const body = `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"${job.tool}","arguments":${callArgs}}}`;
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: 'POST',
          agent,
          headers: { ...job.headers, 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          if (res.statusCode !== 200) errors++;
          res.on('data', (c: Buffer) => (bytes += c.length));
          res.on('end', resolve);
          res.on('error', () => (errors++, resolve()));
        },
      );
      req.on('error', () => (errors++, resolve()));
      req.end(body);
    });
  const lat: number[] = [];
  const cpu0 = cpuUs('self');
  const t0 = performance.now();
  const end = t0 + job.ms;
  if (job.rate === undefined) {
    const worker = async () => {
      while (performance.now() < end) {
        const s = performance.now();
        await once();
        lat.push(performance.now() - s);
      }
    };
    await Promise.all(Array.from({ length: job.conns ?? 32 }, worker));
  } else {
    // Open loop: call i is due at t0 + i/rate whatever happened to the ones before it.
    const interval = 1000 / job.rate;
    const inflight: Array<Promise<void>> = [];
    let i = 0;
    while (performance.now() < end) {
      const now = performance.now();
      while (t0 + i * interval <= now) {
        const due = t0 + i * interval;
        i++;
        inflight.push(once().then(() => void lat.push(performance.now() - due)));
      }
      await new Promise((r) => setTimeout(r, 1));
    }
    await Promise.all(inflight);
  }
  const ms = performance.now() - t0;
  agent.destroy();
  lat.sort((a, b) => a - b);
  const pct = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(lat.length * p))] : NaN);
  return { calls: lat.length, errors, ms, bytes, p50: pct(0.5), p99: pct(0.99), cpuUs: cpuUs('self') - cpu0 };
}

// ---- the orchestrator -----------------------------------------------------------------

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** Processes whose CPU is the target's cost (the relay nodes; for direct, the server). */
  pids: number[];
  /** phonebridge nodes: with PHONEBRIDGE_LOADTEST_RELAY_PROFILE_DIR, each profiles its small-call rounds alone. */
  nodes?: Array<{ profile(label: string): Promise<string | null> }>;
  /** The Redis topology the target's nodes share: its commands are counted per call. */
  redis?: RedisCounter;
}

const session = (url: string, headers: Record<string, string>) => probedSession(url, headers, 'relay-overhead');

const haveStrace = spawnSync('strace', ['-V']).status === 0;

/**
 * Send syscalls, epoll waits and event-loop iterations (lib/strace.ts: an iteration that sleeps
 * is two epoll waits) of `pids` while `work` runs: at low rates nearly each iteration is a sleep
 * and a wake-up, the per-iteration cost that dominates there.
 */
async function countSyscalls<T>(
  pids: number[],
  work: () => Promise<T>,
): Promise<{ sends: number; epollWaits: number; iterations: number; sleeps: number; result: T }> {
  const dir = mkdtempSync(join(tmpdir(), 'pb-strace-'));
  const tracers = await Promise.all(
    pids.map((pid, i) =>
      traceCalls(pid, join(dir, `c${i}`), ['sendto', 'sendmsg', 'write', 'writev', 'epoll_wait', 'epoll_pwait']),
    ),
  );
  const result = await work();
  let sends = 0;
  let epollWaits = 0;
  let iterations = 0;
  let sleeps = 0;
  for (const t of tracers) {
    const tally = await t.stop();
    if (!tally) continue;
    for (const [name, n] of Object.entries(tally.calls))
      if (name.startsWith('epoll_')) epollWaits += n;
      else sends += n;
    iterations += tally.loopIterations;
    sleeps += tally.loopSleeps;
  }
  rmSync(dir, { recursive: true, force: true });
  return { sends, epollWaits, iterations, sleeps, result };
}

const median = (xs: number[]) => {
  const s = [...xs].filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};
const round2 = (x: number) => Math.round(x * 100) / 100;
/** The targets read at a CPU limit: one process each, whose calls/s the limit then sets. */
const ONE_NODE_SERVERS = ['baseline', 'floor', 'relay'];
/** One idle window's length (the idle rates: measureIdle in main). */
const IDLE_MS = 2000;
/** A round at a CPU limit counts when its server ran out of quota in this share of periods. */
const BOUND_BY_LIMIT = 0.8;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      out: { type: 'string', default: join(ROOT, '.tmp/loadtest/relay-overhead') },
      rounds: { type: 'string', default: '3' },
      'round-ms': { type: 'string', default: '3000' },
      conns: { type: 'string', default: '32' },
      'no-cluster': { type: 'boolean', default: false },
      // No strace rounds (send syscalls and event-loop iterations per call): their checks are then not
      // decided. strace attaching is the slowest part of a short run (the smoke test's).
      'no-strace': { type: 'boolean', default: false },
      // The open-loop rate of the "same rate" rounds, fixed (calls/s), instead of half the
      // slowest target's closed-loop peak: for A/B runs, whose peaks differ run to run.
      'low-rate': { type: 'string' },
      // Redis topologies for the two-node targets, repeatable (one Redis, Sentinel, Cluster: see
      // src/bus/redis/topology.ts): per URL, a cross-node target and a same-node one.
      'redis-url': { type: 'string', multiple: true },
      // Profiles the relay children, the floor and the baseline (`node --cpu-prof`): summarise
      // with loadtest/cpu-profile.ts.
      'cpu-prof': { type: 'string' },
      // Whole runs, one after another, each in its own processes; every check is decided on the
      // median of the runs' figures (loadtest/lib/runs.ts). At most 5 (the loadtest runner's
      // 30-minute bound).
      runs: { type: 'string', default: '1' },
      // Cores' worth of CPU each one-node server gets in the rounds at a CPU limit
      // (docs/decisions/0248-calls-per-second-at-a-cpu-limit.md); 0 leaves them out.
      'cpu-limit': { type: 'string', default: '0.25' },
      // Connections in those rounds: enough that a call always waits at the server, so the
      // phone's and the clients' own latency leave it no idle stretch within a period.
      'limit-conns': { type: 'string', default: '128' },
    },
    allowPositionals: true,
  });
  const runs = Math.max(1, Math.min(5, Math.floor(Number(values.runs)) || 1));
  if (runs > 1) return repeatedRuns(runs, values.out);
  const rounds = Math.max(1, Math.min(10, Number(values.rounds)));
  const roundMs = Math.max(500, Math.min(10_000, Number(values['round-ms'])));
  const conns = Math.max(1, Math.min(256, Number(values.conns)));
  const started = Date.now();
  const loadavgAtStart = (await import('node:os')).loadavg();
  // A run with the two-node floor takes about five minutes: eight, and two more for each
  // further Redis topology.
  const boundMin = 8 + 2 * Math.max(0, (values['redis-url']?.length ?? 1) - 1);
  const hardStop = setTimeout(() => {
    console.error(`relay-overhead: over ${boundMin} minutes, giving up`);
    process.exit(2);
  }, boundMin * 60_000);
  hardStop.unref();

  const cleanup: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const f of cleanup.reverse()) await f().catch(() => {});
  };
  process.on('SIGINT', () => void stopAll().finally(() => process.exit(130)));
  try {
    const data = mkdtempSync(join(tmpdir(), 'pb-overhead-'));
    cleanup.push(() => Promise.resolve(rmSync(data, { recursive: true, force: true })));
    const { startRelayChild } = await import('./fleet-relay.ts');
    const profDir = values['cpu-prof'];
    // Extra node flags for the servers, as loadtest/lib/relay.ts takes them (e.g. '--perf-basic-prof' for `perf`).
    const extraArgs = (process.env.PHONEBRIDGE_LOADTEST_RELAY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
    const relayOpts = { execArgv: [...(profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []), ...extraArgs] };

    // The targets.
    const ours = await startRelayChild(['--port', '0', '--data-dir', join(data, 'relay')], relayOpts);
    cleanup.push(() => ours.stop());
    const code = randomBytes(6).toString('hex');
    const key = `pb_${randomBytes(24).toString('base64url')}`;
    const baseline = forkChild(
      join(ROOT, 'loadtest/baseline/relay.ts'),
      ['--code', code, '--key', key],
      relayOpts.execArgv,
    );
    cleanup.push(() => baseline.stop());
    const baselineReady = await baseline.next('ready');
    const floorCode = randomBytes(6).toString('hex');
    const redisUrls = values['redis-url']?.length ? values['redis-url'] : [REDIS_URL];
    // With the cluster targets, the floor also listens on Redis: the owner of the two-node floor.
    const floorChannel = `pbo:floor:${randomBytes(4).toString('hex')}:`;
    const floorBus = values['no-cluster'] ? [] : ['--redis-url', redisUrls[0], '--channel', `${floorChannel}owner`];
    const floor = forkChild(
      join(ROOT, 'loadtest/baseline/uws-floor.ts'),
      ['--code', floorCode, ...floorBus],
      relayOpts.execArgv,
    );
    cleanup.push(() => floor.stop());
    const floorReady = await floor.next('ready');
    const phone = forkChild(SELF, ['--role', 'phone']);
    cleanup.push(() => phone.stop());
    const { directUrl } = await phone.next('ready');
    const load = forkChild(SELF, ['--role', 'load']);
    cleanup.push(() => load.stop());

    const [qr] = await ours.pair(1);
    const deviceId: string = await phone.call({ op: 'pair', qr });
    await phone.call({ op: 'pair', qr: { v: 1, relay: baselineReady.url, code } });
    await phone.call({ op: 'pair', qr: { v: 1, relay: floorReady.url, code: floorCode } });
    await floor.next('phone');
    const [{ token }] = await ours.keys([deviceId]);
    for (let i = 0; i < 100 && !(await ours.connections()).some((c) => c.initialized); i++)
      await new Promise((r) => setTimeout(r, 50));

    const targets: Target[] = [
      {
        name: 'relay',
        url: ours.mcpUrl,
        headers: await session(ours.mcpUrl, { 'x-api-key': token }),
        pids: [ours.child.pid!],
        nodes: [ours],
      },
      {
        name: 'floor',
        url: `${floorReady.url}/mcp`,
        headers: await session(`${floorReady.url}/mcp`, {}),
        pids: [floor.proc.pid!],
      },
      {
        name: 'baseline',
        url: `${baselineReady.url}/mcp`,
        headers: await session(`${baselineReady.url}/mcp`, { 'x-api-key': key }),
        pids: [baseline.proc.pid!],
      },
      { name: 'direct', url: directUrl, headers: await session(directUrl, {}), pids: [phone.proc.pid!] },
    ];

    if (!values['no-cluster'])
      for (const [u, redisUrl] of redisUrls.entries()) {
        const counter = await redisCounter(redisUrl);
        cleanup.push(() => Promise.resolve(counter.close()));
        // The first topology's targets keep their names (the checks below read them).
        const suffix = u === 0 ? '' : `@${counter.kind}${u}`;
        const db = await createDatabase('pb_overhead');
        cleanup.push(() => db.drop());
        const prefix = `pbo:${randomBytes(4).toString('hex')}:`;
        cleanup.push(() => counter.dropPrefix(prefix));
        const flags = ['--port', '0', '--database-url', db.url, '--redis-url', redisUrl, '--redis-prefix', prefix];
        const a = await startRelayChild([...flags, '--node-id', 'bench-a'], relayOpts);
        cleanup.push(() => a.stop());
        const b = await startRelayChild([...flags, '--node-id', 'bench-b'], relayOpts);
        cleanup.push(() => b.stop());
        const [qrA] = await a.pair(1);
        const clusterDevice: string = await phone.call({ op: 'pair', qr: qrA });
        const [{ token: ct }] = await a.keys([clusterDevice]);
        for (let i = 0; i < 100 && !(await a.connections()).some((c) => c.initialized); i++)
          await new Promise((r) => setTimeout(r, 50));
        targets.push({
          name: `cluster${suffix}`,
          url: b.mcpUrl,
          headers: await session(b.mcpUrl, { 'x-api-key': ct }),
          pids: [a.child.pid!, b.child.pid!],
          nodes: [a, b],
          redis: counter,
        });
        // The same two nodes, the client on the phone's node: what a same-node call costs Redis.
        targets.push({
          name: `same-node${suffix}`,
          url: a.mcpUrl,
          headers: await session(a.mcpUrl, { 'x-api-key': ct }),
          pids: [a.child.pid!, b.child.pid!],
          redis: counter,
        });
        if (u > 0) continue;
        // The two-node floor (docs/decisions/0231-the-two-node-floor.md): a call to a second
        // floor process crosses Redis to the floor that holds the phone, and back.
        const floorOrigin = forkChild(
          join(ROOT, 'loadtest/baseline/uws-floor.ts'),
          [
            ...['--code', randomBytes(6).toString('hex'), '--redis-url', redisUrl],
            ...['--channel', `${floorChannel}origin`, '--owner-channel', `${floorChannel}owner`],
          ],
          relayOpts.execArgv,
        );
        cleanup.push(() => floorOrigin.stop());
        const { url: originUrl } = await floorOrigin.next('ready');
        targets.push({
          name: 'floor-cluster',
          url: `${originUrl}/mcp`,
          headers: await session(`${originUrl}/mcp`, {}),
          pids: [floor.proc.pid!, floorOrigin.proc.pid!],
          redis: counter,
        });
      }

    if (profDir)
      console.log(`cpu profiles in ${profDir}: ${targets.map((t) => `${t.name} ${t.pids.join('+')}`).join(', ')}`);
    const phonePid = phone.proc.pid!;
    const run = async (t: Target, job: Omit<Job, 'url' | 'headers'>) => {
      const redis0 = await t.redis?.count();
      const redisCpu0 = await t.redis?.cpuUs();
      const sys0 = t.pids.reduce((s, p) => s + processCpuUs(p).system, 0);
      const each0 = t.pids.map((p) => cpuUs(p));
      const main0 = t.pids.map((p) => mainThreadCpuTimeUs(p));
      const phone0 = cpuUs(phonePid);
      const r: JobResult = await load.call({ op: 'run', job: { ...job, url: t.url, headers: t.headers } });
      const each = t.pids.map((p, i) => cpuUs(p) - each0[i]);
      const mains = t.pids.map((p, i) => mainThreadCpuTimeUs(p) - main0[i]);
      const cpu = each.reduce((s, x) => s + x, 0);
      const sys = t.pids.reduce((s, p) => s + processCpuUs(p).system, 0) - sys0;
      // The phone process is the direct target's server: its CPU is counted there, not here.
      const phoneCpuUs = t.pids.includes(phonePid) ? 0 : cpuUs(phonePid) - phone0;
      const redisCpuUs = redisCpu0 === undefined ? undefined : (await t.redis!.cpuUs()) - redisCpu0;
      const redis1 = await t.redis?.count();
      const redis = redis0 && redis1 ? perCall(redis0, redis1, r.calls) : undefined;
      return {
        ...r,
        serverCpuUs: cpu,
        serverCpuUsByProcess: each,
        /**
         * Each process's CPU off its main thread: V8's compiler and collector, libuv's pool. Not
         * below 0: a thread that exits in the round takes its time out of the live threads' sum.
         */
        serverHelperCpuUsByProcess: each.map((x, i) => Math.max(0, x - mains[i])),
        serverSystemCpuUs: sys,
        phoneCpuUs,
        redis,
        redisCpuUs,
      };
    };

    // Warm-up (JIT, caches), then each target's idle CPU (timers, the store's journal poll: a
    // cost per second, not per call), then closed-loop rounds, alternating targets.
    // (Rounds under 1 s, the tiny mode of a smoke test, warm up for one round's length.)
    for (const t of targets) await run(t, { tool: 'echo', ms: Math.min(1000, roundMs), conns });
    // Each target's idle rates (timers, the store's journal poll; Redis: heartbeats, replicas'
    // acks) over IDLE_MS with no calls, per ms. Read in three windows — after the warm-up, before
    // the same-rate rounds and after them — and taken off as the median of the three: one window
    // read the one-node relay at 3.5 % of a core against 1.8 in its other runs (the collector or
    // the compiler finishing the warm-up's work), which alone moved two nodes ÷ one at the same
    // rate from 1.95 to 2.22 (docs/BENCHMARKS.md, "The idle rate in three windows; the journal
    // read after a change").
    type IdleRates = { cpuUs: number; redis?: number; sent?: number; redisCpuUs?: number };
    const idleWindows: Array<Record<string, IdleRates>> = [];
    const measureIdle = async () => {
      const c0 = targets.map((t) => t.pids.reduce((s, p) => s + cpuUs(p), 0));
      const r0 = await Promise.all(targets.map((t) => t.redis?.count() ?? Promise.resolve(undefined)));
      const rc0 = await Promise.all(targets.map((t) => t.redis?.cpuUs() ?? Promise.resolve(undefined)));
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, IDLE_MS));
      const ms = performance.now() - t0;
      const r1 = await Promise.all(targets.map((t) => t.redis?.count() ?? Promise.resolve(undefined)));
      const rc1 = await Promise.all(targets.map((t) => t.redis?.cpuUs() ?? Promise.resolve(undefined)));
      const window: Record<string, IdleRates> = {};
      targets.forEach((t, i) => {
        const rates: IdleRates = { cpuUs: (t.pids.reduce((s, p) => s + cpuUs(p), 0) - c0[i]) / ms };
        const [rcA, rcB] = [rc0[i], rc1[i]];
        if (rcA !== undefined && rcB !== undefined) rates.redisCpuUs = (rcB - rcA) / ms;
        const [a, b] = [r0[i], r1[i]];
        if (a && b) {
          rates.redis = perCall(a, b, 1).total / ms;
          rates.sent = perCall(a, b, 1).sent / ms;
        }
        window[t.name] = rates;
      });
      idleWindows.push(window);
    };
    await measureIdle();
    const closed: Record<string, Array<Awaited<ReturnType<typeof run>>>> = {};
    const blob: Record<string, number[]> = {};
    // Server CPU per 256 KiB answer (docs/decisions/0235-pooled-answer-buffers.md: what a large answer's buffers cost).
    const blobCpu: Record<string, number[]> = {};
    const inFlight64: Record<string, Array<Awaited<ReturnType<typeof run>>>> = {};
    for (let r = 0; r < rounds; r++) {
      for (const t of targets) {
        // The profile restarts here and is written after the round: the small calls alone.
        for (const n of t.nodes ?? []) await n.profile('until-small-calls');
        // Progress, and a mark for outside profilers (`perf record -p PID` on this round alone).
        console.log(`round ${r + 1}: ${t.name}, small calls, ${roundMs} ms (server pids ${t.pids.join(' ')})`);
        (closed[t.name] ??= []).push(await run(t, { tool: 'echo', ms: roundMs, conns }));
        for (const n of t.nodes ?? []) await n.profile(`small-calls-${t.name}-round-${r + 1}`);
        // Redis per call with 64 calls in flight (what a busy node batches per turn).
        if (t.redis)
          (inFlight64[t.name] ??= []).push(await run(t, { tool: 'echo', ms: Math.max(500, roundMs / 2), conns: 64 }));
        const b = await run(t, { tool: 'blob', ms: Math.max(500, roundMs / 2), conns: 8 });
        (blob[t.name] ??= []).push(b.bytes / 1e6 / (b.ms / 1000));
        (blobCpu[t.name] ??= []).push(b.serverCpuUs / Math.max(1, b.calls));
      }
    }
    // Calls/s at a CPU limit (docs/decisions/0248-calls-per-second-at-a-cpu-limit.md): each
    // one-node server alone under the same CFS quota, closed loop, alternating; the load
    // generator and the phone keep the rest of the cores, so the server is what runs out.
    const limitCores = Math.max(0, Math.min(1, Number(values['cpu-limit']) || 0));
    const limit = limitCores > 0 ? cpuLimit(limitCores) : { unavailable: '--cpu-limit 0' };
    const limited: Record<string, Array<Awaited<ReturnType<typeof run>> & { throttledShare: number }>> = {};
    const limitConns = Math.max(1, Math.min(256, Number(values['limit-conns']) || 128));
    const limitedTargets = targets.filter((t) => ONE_NODE_SERVERS.includes(t.name));
    if ('confine' in limit) {
      cleanup.push(() => Promise.resolve(limit.remove()));
      for (let r = 0; r < rounds; r++)
        for (const t of limitedTargets) {
          console.log(`round ${r + 1}: ${t.name}, small calls at a limit of ${limitCores} core, ${roundMs} ms`);
          limit.confine(t.pids);
          try {
            const before = limit.throttling();
            const res = await run(t, { tool: 'echo', ms: roundMs, conns: limitConns });
            const after = limit.throttling();
            const periods = Math.max(1, after.periods - before.periods);
            (limited[t.name] ??= []).push({ ...res, throttledShare: (after.throttled - before.throttled) / periods });
          } finally {
            limit.release(t.pids);
          }
        }
    } else console.log(`no rounds at a CPU limit: ${limit.unavailable}`);
    const rate = Math.round(median(closed.baseline.map((x) => (x.calls / x.ms) * 1000)) / 2);
    const open: Record<string, Array<Awaited<ReturnType<typeof run>>>> = {};
    for (let r = 0; r < rounds; r++)
      for (const t of targets) (open[t.name] ??= []).push(await run(t, { tool: 'echo', ms: roundMs, rate }));
    await measureIdle();
    // The direct path (the SDK's own Streamable HTTP server) may not sustain half the baseline's
    // peak: added latency is also measured at half of the slowest target's peak, a rate every
    // target sustains, so the floor is a floor.
    const lowRate = values['low-rate']
      ? Math.max(50, Math.min(20_000, Number(values['low-rate'])))
      : Math.max(
          50,
          Math.round(Math.min(...targets.map((t) => median(closed[t.name].map((x) => (x.calls / x.ms) * 1000)))) / 2),
        );
    // A warm-up at this rate first, unmeasured: a low rate takes paths the closed loop rarely
    // does (a session's refresh, the key cache's expiry, a new deadline list), and TurboFan's
    // one-off recompilation of them (docs/BENCHMARKS.md, "On-CPU profiles with `perf`") would
    // otherwise land in the first measured rounds.
    const lowWarmMs = roundMs < 1000 ? roundMs : Math.max(1000, roundMs / 2);
    for (const t of targets) await run(t, { tool: 'echo', ms: lowWarmMs, rate: lowRate });
    const openLow: Record<string, Array<Awaited<ReturnType<typeof run>>>> = {};
    for (let r = 0; r < rounds; r++)
      for (const t of targets) {
        console.log(`round ${r + 1}: ${t.name}, ${lowRate} calls/s, ${roundMs} ms (server pids ${t.pids.join(' ')})`);
        (openLow[t.name] ??= []).push(await run(t, { tool: 'echo', ms: roundMs, rate: lowRate }));
      }
    await measureIdle();
    /** Each target's idle rate of one kind, per ms: the median of the windows that read it. */
    const idleRates = (kind: keyof IdleRates) => {
      const out: Record<string, number> = {};
      for (const t of targets) {
        const xs = idleWindows.map((w) => w[t.name][kind]).filter((x): x is number => x !== undefined);
        if (xs.length) out[t.name] = median(xs);
      }
      return out;
    };
    const idleUsPerMs = idleRates('cpuUs');
    const idleRedisPerMs = idleRates('redis');
    const idleSentPerMs = idleRates('sent');
    const idleRedisCpuUsPerMs = idleRates('redisCpuUs');
    const sends: Record<string, number> = {};
    const epollWaits: Record<string, number> = {};
    const lowRateEpollWaits: Record<string, number> = {};
    const lowRateNetEpollWaits: Record<string, number> = {};
    const lowRateNetIterations: Record<string, number> = {};
    const lowRateNetSleeps: Record<string, number> = {};
    if (haveStrace && !values['no-strace'])
      for (const t of targets) {
        const closedLoop = await countSyscalls(t.pids, () =>
          run(t, { tool: 'echo', ms: Math.max(500, roundMs / 2), conns }),
        );
        sends[t.name] = closedLoop.sends / Math.max(1, closedLoop.result.calls);
        epollWaits[t.name] = closedLoop.epollWaits / Math.max(1, closedLoop.result.calls);
        const lowMs = Math.max(500, roundMs / 2);
        const low = await countSyscalls(t.pids, () => run(t, { tool: 'echo', ms: lowMs, rate: lowRate }));
        lowRateEpollWaits[t.name] = low.epollWaits / Math.max(1, low.result.calls);
        // The same processes idle for as long: timers (heartbeats, lease renewals, the journal
        // poll) wake them without a call, which at a low rate on a busy machine is a large share.
        const idle = await countSyscalls(t.pids, () => new Promise((r) => setTimeout(r, lowMs)));
        const perLowCall = (busy: number, idle: number) => Math.max(0, busy - idle) / Math.max(1, low.result.calls);
        lowRateNetEpollWaits[t.name] = perLowCall(low.epollWaits, idle.epollWaits);
        lowRateNetIterations[t.name] = perLowCall(low.iterations, idle.iterations);
        lowRateNetSleeps[t.name] = perLowCall(low.sleeps, idle.sleeps);
      }

    const report: Json = {
      scenario: 'relay-overhead',
      at: new Date(started).toISOString(),
      seconds: Math.round((Date.now() - started) / 1000),
      machine: {
        cpus: (await import('node:os')).cpus().length,
        loadavgAtStart,
        loadavgAtEnd: (await import('node:os')).loadavg(),
      },
      settings: { rounds, roundMs, conns, openRate: rate, lowRate, revision: REVISION, blobBytes: BLOB_BYTES },
      targets: {} as Json,
      checks: [] as Json[],
    };
    /** A round's CPU off the main threads (V8 compiling and collecting, libuv's pool), per call. */
    const helperPerCall = (x: Awaited<ReturnType<typeof run>>) =>
      round2(x.serverHelperCpuUsByProcess.reduce((s, y) => s + y, 0) / Math.max(1, x.calls));
    for (const t of targets) {
      const c = closed[t.name];
      const o = open[t.name];
      const lowRateNetByRound = openLow[t.name].map((x) =>
        round2((x.serverCpuUs - idleUsPerMs[t.name] * x.ms) / Math.max(1, x.calls)),
      );
      report.targets[t.name] = {
        callsPerSecond: Math.round(median(c.map((x) => (x.calls / x.ms) * 1000))),
        bestCallsPerSecond: Math.round(Math.max(...c.map((x) => (x.calls / x.ms) * 1000))),
        idleCpuPercent: round2(idleUsPerMs[t.name] / 10),
        /** Each idle window's figure (after the warm-up, before and after the same-rate rounds): idleCpuPercent is their median. */
        idleCpuPercentByWindow: idleWindows.map((w) => round2(w[t.name].cpuUs / 10)),
        /** Less what the process burns idle over the same time (its timers and journal poll). */
        netServerCpuUsPerCall: round2(
          median(c.map((x) => (x.serverCpuUs - idleUsPerMs[t.name] * x.ms) / Math.max(1, x.calls))),
        ),
        errors: [...c, ...o, ...openLow[t.name]].reduce((s, x) => s + x.errors, 0),
        serverCpuUsPerCall: round2(median(c.map((x) => x.serverCpuUs / Math.max(1, x.calls)))),
        /** The kernel's share (stime) of the server CPU: syscalls and the loopback TCP they drive. */
        serverSystemCpuUsPerCall: round2(median(c.map((x) => x.serverSystemCpuUs / Math.max(1, x.calls)))),
        /** Per server process, in `pids` order (a cluster's phone node first), gross: which node a cost is on. */
        serverCpuUsPerCallByProcess: t.pids.map((_, i) =>
          round2(median(c.map((x) => x.serverCpuUsByProcess[i] / Math.max(1, x.calls)))),
        ),
        /** At the same rate with nothing taken off: beside the net figure, which leans on the idle rate. */
        lowRateServerCpuUsPerCall: round2(median(openLow[t.name].map((x) => x.serverCpuUs / Math.max(1, x.calls)))),
        lowRateServerCpuUsPerCallByProcess: t.pids.map((_, i) =>
          round2(median(openLow[t.name].map((x) => x.serverCpuUsByProcess[i] / Math.max(1, x.calls)))),
        ),
        /** What of those is off the main threads (V8 compiling and collecting, libuv's pool), per round. */
        helperCpuUsPerCallByRound: c.map(helperPerCall),
        lowRateHelperCpuUsPerCallByRound: openLow[t.name].map(helperPerCall),
        lowRateNetServerCpuUsPerCallByRound: lowRateNetByRound,
        loadCpuUsPerCall: round2(median(c.map((x) => x.cpuUs / Math.max(1, x.calls)))),
        /** The phone process (the reference agent) per call, for what shares the cores. */
        phoneCpuUsPerCall: round2(median(c.map((x) => x.phoneCpuUs / Math.max(1, x.calls)))),
        /** The same two at the same rate: the phone does the same work for every target's call, so
         *  a difference here is the phone's garbage collection landing in one target's rounds. */
        lowRateLoadCpuUsPerCall: round2(median(openLow[t.name].map((x) => x.cpuUs / Math.max(1, x.calls)))),
        lowRatePhoneCpuUsPerCall: round2(median(openLow[t.name].map((x) => x.phoneCpuUs / Math.max(1, x.calls)))),
        closedP50Ms: round2(median(c.map((x) => x.p50))),
        closedP99Ms: round2(median(c.map((x) => x.p99))),
        openP50Ms: round2(median(o.map((x) => x.p50))),
        openP99Ms: round2(median(o.map((x) => x.p99))),
        lowRateP50Ms: round2(median(openLow[t.name].map((x) => x.p50))),
        lowRateP99Ms: round2(median(openLow[t.name].map((x) => x.p99))),
        /** CPU per call at the same arrival rate for every target (half the slowest peak), net of
         *  idle: cost under equal load, where the closed-loop figure also holds how many calls
         *  each turn of a target's event loop shares. */
        lowRateNetServerCpuUsPerCall: median(lowRateNetByRound),
        sendsPerCall: sends[t.name] !== undefined ? round2(sends[t.name]) : null,
        /** epoll waits per call, summed over the target's processes (strace): one or two an
         *  event-loop iteration (lib/strace.ts). */
        epollWaitsPerCall: epollWaits[t.name] !== undefined ? round2(epollWaits[t.name]) : null,
        lowRateEpollWaitsPerCall: lowRateEpollWaits[t.name] !== undefined ? round2(lowRateEpollWaits[t.name]) : null,
        /** Less the processes' idle wake-ups over the same time (strace of an idle stretch). */
        lowRateNetEpollWaitsPerCall:
          lowRateNetEpollWaits[t.name] !== undefined ? round2(lowRateNetEpollWaits[t.name]) : null,
        /** Event-loop iterations of the main threads, net of idle likewise: an iteration is one
         *  or two epoll waits (lib/strace.ts). */
        lowRateNetLoopIterationsPerCall:
          lowRateNetIterations[t.name] !== undefined ? round2(lowRateNetIterations[t.name]) : null,
        /** Of those, the iterations that went to sleep first, net of idle. */
        lowRateNetLoopSleepsPerCall: lowRateNetSleeps[t.name] !== undefined ? round2(lowRateNetSleeps[t.name]) : null,
        blobMBps: round2(median(blob[t.name])),
        blobServerCpuUsPerAnswer: round2(median(blobCpu[t.name])),
        /** Redis commands per call on every master (INFO commandstats; script-internal ones included). */
        redisCommandsPerCall: t.redis ? round2(median(c.map((x) => x.redis!.total))) : null,
        lowRateRedisCommandsPerCall: t.redis ? round2(median(openLow[t.name].map((x) => x.redis!.total))) : null,
        /** Less what Redis runs idle over the same time (heartbeats, replicas' acks): the calls' own. */
        netRedisCommandsPerCall: t.redis
          ? round2(median(c.map((x) => x.redis!.total - (idleRedisPerMs[t.name] * x.ms) / Math.max(1, x.calls))))
          : null,
        lowRateNetRedisCommandsPerCall: t.redis
          ? round2(
              median(
                openLow[t.name].map((x) => x.redis!.total - (idleRedisPerMs[t.name] * x.ms) / Math.max(1, x.calls)),
              ),
            )
          : null,
        idleRedisCommandsPerSecond: t.redis ? round2(idleRedisPerMs[t.name] * 1000) : null,
        /** Commands the nodes sent (a script once), per call, net of what they send idle. */
        netRedisSentPerCall: t.redis
          ? round2(median(c.map((x) => x.redis!.sent - (idleSentPerMs[t.name] * x.ms) / Math.max(1, x.calls))))
          : null,
        lowRateNetRedisSentPerCall: t.redis
          ? round2(
              median(openLow[t.name].map((x) => x.redis!.sent - (idleSentPerMs[t.name] * x.ms) / Math.max(1, x.calls))),
            )
          : null,
        idleRedisSentPerSecond: t.redis ? round2(idleSentPerMs[t.name] * 1000) : null,
        /**
         * Redis' own CPU per call (INFO cpu on the masters), net of what it burns idle over the same
         * time: it shares the cores with the nodes in the closed loop, and sizes Redis per call rate.
         */
        netRedisCpuUsPerCall: t.redis
          ? round2(median(c.map((x) => (x.redisCpuUs! - idleRedisCpuUsPerMs[t.name] * x.ms) / Math.max(1, x.calls))))
          : null,
        lowRateNetRedisCpuUsPerCall: t.redis
          ? round2(
              median(
                openLow[t.name].map((x) => (x.redisCpuUs! - idleRedisCpuUsPerMs[t.name] * x.ms) / Math.max(1, x.calls)),
              ),
            )
          : null,
        /** The same with 64 calls in flight (closed loop, 64 connections). */
        inFlight64CallsPerSecond: t.redis
          ? Math.round(median(inFlight64[t.name].map((x) => (x.calls / x.ms) * 1000)))
          : null,
        inFlight64NetRedisSentPerCall: t.redis
          ? round2(
              median(
                inFlight64[t.name].map((x) => x.redis!.sent - (idleSentPerMs[t.name] * x.ms) / Math.max(1, x.calls)),
              ),
            )
          : null,
        inFlight64NetRedisCommandsPerCall: t.redis
          ? round2(
              median(
                inFlight64[t.name].map((x) => x.redis!.total - (idleRedisPerMs[t.name] * x.ms) / Math.max(1, x.calls)),
              ),
            )
          : null,
        lowRateRedisTop: t.redis ? openLow[t.name][openLow[t.name].length - 1].redis!.top : null,
        rounds: c.map((x) => Math.round((x.calls / x.ms) * 1000)),
        /** Closed loop with this server alone at a CPU limit (docs/decisions/0248). */
        atCpuLimit: limited[t.name] ? atLimit(limited[t.name], limitCores) : null,
      };
    }
    const T = report.targets;
    // Not a target: the two-node floor against the one-node floor, the same figures the
    // cluster targets read (docs/decisions/0231-the-two-node-floor.md), each printed beside its
    // check. Where the floors' own figure misses a cluster target, no relay that routes through
    // Redis pub/sub meets it here; the hop's CPU (two nodes less one), beside the relay's, says
    // how much of the relay's is its own.
    if (T['floor-cluster'] && T.cluster) {
      const F = T['floor-cluster'];
      report.clusterFloor = {
        cpuPerCallOverOneNode: round2(F.netServerCpuUsPerCall / T.floor.netServerCpuUsPerCall),
        cpuPerCallOverOneNodeAtSameRate: round2(F.lowRateNetServerCpuUsPerCall / T.floor.lowRateNetServerCpuUsPerCall),
        hopCpuUsPerCallAtSameRate: round2(F.lowRateNetServerCpuUsPerCall - T.floor.lowRateNetServerCpuUsPerCall),
        relayHopCpuUsPerCallAtSameRate: round2(
          T.cluster.lowRateNetServerCpuUsPerCall - T['same-node'].lowRateNetServerCpuUsPerCall,
        ),
        redisCpuUsPerCallAtSameRate: F.lowRateNetRedisCpuUsPerCall,
        addedP50MsAtSameRate: round2(F.lowRateP50Ms - T.floor.lowRateP50Ms),
        closedLoopCallsPerSecondShare: round2(F.callsPerSecond / T.floor.callsPerSecond),
        loopIterationsPerCallAtSameRate: F.lowRateNetLoopIterationsPerCall,
      };
    }
    // Not a target: the same-rate ratios with no idle rate taken off. The net figures lean on the
    // idle rate (a few µs a call at these rates, which moved between runs as much as a cut is
    // worth); these do not, and read steadier (docs/BENCHMARKS.md, "The idle rate in three
    // windows; the journal read after a change").
    const grossAtSameRate = (a: string, b: string) =>
      T[a] && T[b] ? round2(T[a].lowRateServerCpuUsPerCall / T[b].lowRateServerCpuUsPerCall) : null;
    report.withNothingTakenOffAtSameRate = {
      relayOverFloor: grossAtSameRate('relay', 'floor'),
      clusterOverRelay: grossAtSameRate('cluster', 'relay'),
      floorClusterOverFloor: grossAtSameRate('floor-cluster', 'floor'),
    };
    // `floor`: the same figure for a floor (the two-node floor unless `floorName` says), printed beside it.
    const check = (name: string, value: number, limit: number, atMost: boolean, floor?: number, floorName?: string) =>
      report.checks.push({
        name,
        value: round2(value),
        exact: value,
        limit,
        atMost,
        ok: meets(value, limit, atMost),
        floor,
        floorName,
      });
    if (T.relay.sendsPerCall !== null) check('send syscalls per small call (relay)', T.relay.sendsPerCall, 2, true);
    // The uWS floor's own figure beside it: at or over 0.4 on these machines (docs/BENCHMARKS.md,
    // "The floor, and the targets against it"), where no relay on this stack meets the target.
    for (const [suffix, cpu] of [
      ['', 'serverCpuUsPerCall'],
      [', net of idle', 'netServerCpuUsPerCall'],
    ] as const)
      check(
        `relay CPU per call / baseline${suffix}`,
        T.relay[cpu] / T.baseline[cpu],
        0.4,
        true,
        round2(T.floor[cpu] / T.baseline[cpu]),
        "the uWS floor's",
      );
    // Calls/s against the baseline's at the same CPU limit (docs/decisions/0248), decided only
    // where both servers were what ran out; the floor's figure beside it.
    const limitedCheck = `relay calls/s / baseline, each at a CPU limit of ${limitCores} core (median round)`;
    const [R, B, F] = [T.relay.atCpuLimit, T.baseline.atCpuLimit, T.floor.atCpuLimit];
    if (R && B && R.throttledShare >= BOUND_BY_LIMIT && B.throttledShare >= BOUND_BY_LIMIT)
      check(
        limitedCheck,
        R.callsPerSecond / B.callsPerSecond,
        1.5,
        false,
        F ? round2(F.callsPerSecond / B.callsPerSecond) : undefined,
        "the uWS floor's",
      );
    else
      report.checks.push({
        name: limitedCheck,
        value: null,
        limit: 1.5,
        ok: null,
        why:
          R && B
            ? `a server was not what ran out: throttled in ${R.throttledShare} (relay) and ${B.throttledShare} (baseline) of periods, under ${BOUND_BY_LIMIT}`
            : `not measured: ${'unavailable' in limit ? limit.unavailable : 'no rounds'}`,
      });
    // Against direct only where direct keeps up with that rate: past its peak its queue, not the
    // relay, sets the difference (a relay "seconds faster" than a server it fronts is no reading).
    if (T.direct.callsPerSecond >= report.settings.openRate) {
      check('added p50 over direct at half baseline peak (ms)', T.relay.openP50Ms - T.direct.openP50Ms, 0.3, true);
      check('added p99 over direct at half baseline peak (ms)', T.relay.openP99Ms - T.direct.openP99Ms, 2, true);
    } else
      for (const [what, limit] of [
        ['p50', 0.3],
        ['p99', 2],
      ] as const)
        report.checks.push({
          name: `added ${what} over direct at half baseline peak (ms)`,
          value: null,
          limit,
          ok: null,
          why: `direct peaks at ${T.direct.callsPerSecond} calls/s, below the rate (${report.settings.openRate}/s): see "at half the slowest peak"`,
        });
    check(
      'added p50 over direct at half the slowest peak (ms)',
      T.relay.lowRateP50Ms - T.direct.lowRateP50Ms,
      0.3,
      true,
    );
    check('added p99 over direct at half the slowest peak (ms)', T.relay.lowRateP99Ms - T.direct.lowRateP99Ms, 2, true);
    check('256 KiB MB/s / baseline', T.relay.blobMBps / T.baseline.blobMBps, 1.5, false);
    check('256 KiB MB/s / direct', T.relay.blobMBps / T.direct.blobMBps, 0.5, false);
    if (T.cluster) {
      check(
        'two nodes: CPU per call / one node, net of idle',
        T.cluster.netServerCpuUsPerCall / T.relay.netServerCpuUsPerCall,
        2.2,
        true,
        report.clusterFloor?.cpuPerCallOverOneNode,
      );
      check(
        'two nodes: CPU per call / one node at the same rate (half the slowest peak), net of idle',
        T.cluster.lowRateNetServerCpuUsPerCall / T.relay.lowRateNetServerCpuUsPerCall,
        2.2,
        true,
        report.clusterFloor?.cpuPerCallOverOneNodeAtSameRate,
      );
      check('two nodes: added p50 over one node (ms)', T.cluster.openP50Ms - T.relay.openP50Ms, 0.5, true);
      check(
        'two nodes: added p50 over one node at half the slowest peak (ms)',
        T.cluster.lowRateP50Ms - T.relay.lowRateP50Ms,
        0.5,
        true,
      );
    }
    // The relay against the uWS floor (loadtest/baseline/uws-floor.ts), CPU per small call.
    check(
      'relay CPU per call / uWS floor, net of idle',
      T.relay.netServerCpuUsPerCall / T.floor.netServerCpuUsPerCall,
      1.3,
      true,
    );
    check(
      'relay CPU per call / uWS floor at the same rate (half the slowest peak), net of idle',
      T.relay.lowRateNetServerCpuUsPerCall / T.floor.lowRateNetServerCpuUsPerCall,
      1.3,
      true,
    );
    // Cross-node calls against same-node calls on the same two nodes, per topology.
    for (const t of targets) {
      if (!t.name.startsWith('cluster')) continue;
      const same = T[t.name.replace(/^cluster/, 'same-node')];
      if (T[t.name].lowRateNetLoopIterationsPerCall !== null)
        check(
          `${t.name}: event-loop iterations (both nodes' main threads, net of idle) per cross-node call at half the slowest peak`,
          T[t.name].lowRateNetLoopIterationsPerCall,
          4,
          true,
          t.name === 'cluster' ? report.clusterFloor?.loopIterationsPerCallAtSameRate : undefined,
        );
      check(
        `${t.name}: added p50 over same-node at half the slowest peak (ms)`,
        T[t.name].lowRateP50Ms - same.lowRateP50Ms,
        0.3,
        true,
        t.name === 'cluster' ? report.clusterFloor?.addedP50MsAtSameRate : undefined,
      );
      check(
        `${t.name}: closed-loop calls/s / same-node`,
        T[t.name].callsPerSecond / same.callsPerSecond,
        0.7,
        false,
        t.name === 'cluster' ? report.clusterFloor?.closedLoopCallsPerSecondShare : undefined,
      );
    }
    // Redis per call (docs/decisions/0151-redis-key-and-channel-layout.md): at the same rate,
    // steady state, and with 64 calls in flight, on every topology given.
    for (const t of targets) {
      if (!t.redis || t.name === 'floor-cluster') continue;
      const limit = t.name.startsWith('same-node') ? 0.2 : 3;
      check(
        `${t.name}: Redis commands sent per call, 64 in flight, net of idle`,
        T[t.name].inFlight64NetRedisSentPerCall,
        limit,
        true,
      );
      check(
        `${t.name}: Redis commands sent per call, closed loop, net of idle`,
        T[t.name].netRedisSentPerCall,
        limit,
        true,
      );
      check(
        `${t.name}: Redis commands sent per call at half the slowest peak, net of idle`,
        T[t.name].lowRateNetRedisSentPerCall,
        limit,
        true,
      );
    }
    // Not a target: how far the floor (loadtest/baseline/uws-floor.ts) is from the baseline, and
    // the relay from the floor. When the floor alone misses a target (CPU, or calls/s: the load
    // generator and the phone share the cores), so does any relay here.
    report.floor = {
      callsPerSecondOverBaseline: round2(T.floor.callsPerSecond / T.baseline.callsPerSecond),
      // Closed loop on the shared cores, where the load generator and the phone cost more per
      // call than the relay (docs/decisions/0248): reported, not a target.
      relayCallsPerSecondOverBaseline: round2(T.relay.callsPerSecond / T.baseline.callsPerSecond),
      relayBestCallsPerSecondOverBaseline: round2(T.relay.bestCallsPerSecond / T.baseline.bestCallsPerSecond),
      cpuPerCallOverBaseline: round2(T.floor.netServerCpuUsPerCall / T.baseline.netServerCpuUsPerCall),
      relayCpuPerCallOverFloor: round2(T.relay.netServerCpuUsPerCall / T.floor.netServerCpuUsPerCall),
      atTheSameRate: {
        cpuPerCallOverBaseline: round2(T.floor.lowRateNetServerCpuUsPerCall / T.baseline.lowRateNetServerCpuUsPerCall),
        relayCpuPerCallOverFloor: round2(T.relay.lowRateNetServerCpuUsPerCall / T.floor.lowRateNetServerCpuUsPerCall),
        relayCpuPerCallOverBaseline: round2(
          T.relay.lowRateNetServerCpuUsPerCall / T.baseline.lowRateNetServerCpuUsPerCall,
        ),
      },
      kernelShareOfFloor: round2(T.floor.serverSystemCpuUsPerCall / T.floor.serverCpuUsPerCall),
    };
    for (const t of Object.keys(T))
      if (T[t].errors > 0) report.checks.push({ name: `${t}: no errors`, value: T[t].errors, limit: 0, ok: false });
    mkdirSync(values.out, { recursive: true });
    writeFileSync(join(values.out, 'report.json'), JSON.stringify(report, null, 2));
    console.log(
      JSON.stringify(
        {
          targets: report.targets,
          floor: report.floor,
          clusterFloor: report.clusterFloor,
          withNothingTakenOffAtSameRate: report.withNothingTakenOffAtSameRate,
        },
        null,
        2,
      ),
    );
    for (const c of report.checks) console.log(checkLine(c));
    console.log(`report: ${join(values.out, 'report.json')}`);
    process.exitCode = report.checks.every((c: Json) => c.ok !== false) ? 0 : 1;
  } finally {
    await stopAll();
  }
}

/** A server's rounds at a CPU limit: its calls/s, and whether the limit is what bound them. */
function atLimit(
  rounds: Array<{
    calls: number;
    ms: number;
    serverCpuUs: number;
    cpuUs: number;
    phoneCpuUs: number;
    throttledShare: number;
  }>,
  cores: number,
) {
  const perCall = (f: (x: (typeof rounds)[number]) => number) =>
    round2(median(rounds.map((x) => f(x) / Math.max(1, x.calls))));
  const coresUsed = (f: (x: (typeof rounds)[number]) => number) =>
    round2(median(rounds.map((x) => f(x) / (x.ms * 1000))));
  return {
    cores,
    callsPerSecond: Math.round(median(rounds.map((x) => (x.calls / x.ms) * 1000))),
    rounds: rounds.map((x) => Math.round((x.calls / x.ms) * 1000)),
    /** Share of CFS periods the server ran out of its quota in: near 1 when the limit bound it. */
    throttledShare: round2(median(rounds.map((x) => x.throttledShare))),
    serverCpuUsPerCall: perCall((x) => x.serverCpuUs),
    /** Cores each process used: the server near its limit, the others with room to spare. */
    serverCores: coresUsed((x) => x.serverCpuUs),
    loadGeneratorCores: coresUsed((x) => x.cpuUs),
    phoneCores: coresUsed((x) => x.phoneCpuUs),
  };
}

/**
 * `--runs N`: this script N times as a child (DIR/run-K/report.json each), then DIR/report.json
 * with every check on the median of the runs' figures, each run's values beside it. Exits 1 on
 * a miss of a median, as one run does on its own figure.
 */
function repeatedRuns(runs: number, out: string): void {
  const argv = process.argv.slice(2);
  // This run's arguments less --runs and --out (each child gets its own DIR/run-K).
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--runs' || a === '--out') i++;
    else if (!a.startsWith('--runs=') && !a.startsWith('--out=')) rest.push(a);
  }
  const reports: Json[] = [];
  for (let k = 1; k <= runs; k++) {
    const dir = join(out, `run-${k}`);
    const file = join(dir, 'report.json');
    rmSync(file, { force: true }); // an earlier run's report must not stand in for this one's
    console.log(`relay-overhead: run ${k} of ${runs} (${dir})`);
    // A miss exits 1 and still writes its report; a crash exits 1 too, without one.
    const r = spawnSync(process.execPath, [...process.execArgv, SELF, ...rest, '--out', dir], {
      stdio: 'inherit',
      timeout: 10 * 60_000,
    });
    if ((r.status !== 0 && r.status !== 1) || !existsSync(file))
      throw new Error(`run ${k} failed (exit ${r.status ?? r.signal}${existsSync(file) ? '' : ', no report'})`);
    reports.push(JSON.parse(readFileSync(file, 'utf8')));
  }
  const checks = medianChecks(reports.map((r) => r.checks));
  const report = {
    scenario: 'relay-overhead',
    runs: reports.map((r) => ({ at: r.at, seconds: r.seconds, machine: r.machine, settings: r.settings })),
    checks,
  };
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'report.json'), JSON.stringify(report, null, 2));
  console.log(`\nthe median of ${runs} runs (each run's value in brackets; met in how many):`);
  for (const c of checks) console.log(checkLine(c));
  console.log(`report: ${join(out, 'report.json')}`);
  process.exitCode = checks.every((c) => c.ok !== false) ? 0 : 1;
}

const role = process.argv.indexOf('--role') >= 0 ? process.argv[process.argv.indexOf('--role') + 1] : undefined;
const entry = role === 'phone' ? phoneMain : role === 'load' ? loadMain : main;
entry().catch((err) => {
  console.error(`relay-overhead${role ? ` (${role})` : ''}: ${(err as Error).stack ?? err}`);
  process.exit(1);
});
