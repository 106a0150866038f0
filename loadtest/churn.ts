// Churn: what a relay holds while clients and phones come and go, and that it all goes again.
// One relay in this process (so the heap measured after GC is the relay's), real phones, raw
// HTTP on 127.0.0.1. For --duration seconds: sessions created and abandoned, GET streams
// dropped mid-notification, calls that time out, calls whose clients leave, phones that
// reconnect, and list_changed storms. Then no traffic at all: every figure must return to its
// plateau within its TTL (session idle, the dropped-stream grace) and no budget may be exceeded
// at any moment. Exits 1 if either fails.
// Run: npm run loadtest -- churn   (CHURN_DURATION_S=…)   or   npx tsx loadtest/churn.ts --duration 45
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { startTestPhone, startTestRelay, type TestPhone } from '../test/helpers/relay.ts';
import { createEchoServer } from '../test/fixtures/echo-server.ts';
import { DeviceAgent, silentLogger } from '../src/device/agent/index.ts';
import { DETACHED_GRACE_MS } from '../src/gateway/session-streams.ts';
import type { LocalBus } from '../src/bus/local/index.ts';
import { metrics } from '../src/metrics.ts';
import { initializeSession } from './lib/mcp-client.ts';

// Heap after GC needs --expose-gc: re-run this file with it (npm run loadtest starts it without).
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), ...process.argv.slice(2)],
    {
      stdio: 'inherit',
      timeout: 4 * 60_000,
    },
  );
  process.exit(r.status ?? 1);
}

const { values } = parseArgs({
  options: { duration: { type: 'string' }, phones: { type: 'string', default: '8' } },
});
const DURATION_S = Math.min(120, Math.max(5, Number(values.duration ?? process.env.CHURN_DURATION_S ?? 40)));
const PHONES = Math.min(32, Math.max(1, Number(values.phones)));
const SESSION_IDLE_MS = 15_000;
const REQUEST_TIMEOUT_MS = 2_000;
const REPLAY_NODE_BYTES = 16 * 1024 * 1024;
const REPLAY_KEY_BYTES = 4 * 1024 * 1024;
const MAX_ORPHANS = 64;
/** After the traffic stops, everything must be back within the longest TTL plus this margin. */
const SETTLE_MS = Math.max(SESSION_IDLE_MS, DETACHED_GRACE_MS) + 15_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const MB = (n: number) => (n / 1024 / 1024).toFixed(1);

function heapAfterGc(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

async function main(): Promise<void> {
  const started = Date.now();
  const relay = await startTestRelay([
    '--session-idle-ms',
    String(SESSION_IDLE_MS),
    '--request-timeout-ms',
    String(REQUEST_TIMEOUT_MS),
    '--replay-node-bytes',
    String(REPLAY_NODE_BYTES),
    '--replay-key-bytes',
    String(REPLAY_KEY_BYTES),
    '--max-orphans',
    String(MAX_ORPHANS),
    '--initialize-per-minute',
    '1000000',
    '--initialize-per-minute-per-address',
    '1000000',
  ]);
  const ctx = relay.relay.node.ctx;
  const bus = ctx.bus as LocalBus;
  const servers = new Map<string, McpServer>();
  const phones: TestPhone[] = [];
  for (let i = 0; i < PHONES; i++) {
    let server: McpServer | undefined;
    const phone = await startTestPhone(relay, () => (server = createEchoServer()), { name: `churn-${i}` });
    servers.set(phone.deviceId, server!);
    phones.push(phone);
  }
  const keys = await Promise.all(phones.map((p) => relay.key(p.deviceId)));
  const agents = new Map(phones.map((p) => [p.deviceId, p.agent]));

  const figures = async () => {
    const b = bus.stats();
    const conns = [...ctx.hub.connections()];
    return {
      heapMB: MB(heapAfterGc()),
      sessions: b.sessions,
      replayBuffers: b.replayBuffers,
      replayMB: MB(b.replayBytes),
      listeners: ctx.hub.allStreams().length,
      sseStreams: (await metrics.sseStreams.get()).values[0]?.value ?? 0,
      routerInFlight: ctx.router.inFlight,
      phonePending: conns.reduce((n, c) => n + c.inFlight, 0),
      orphans: conns.reduce((n, c) => n + c.orphaned, 0),
      counters: b.counters,
    };
  };
  const budgetBreaches: string[] = [];
  const checkBudgets = () => {
    if (bus.budget.bytes > REPLAY_NODE_BYTES) budgetBreaches.push(`replay ${bus.budget.bytes} > node budget`);
    for (const k of keys)
      if (bus.budget.bytesOf(k.id) > REPLAY_KEY_BYTES) budgetBreaches.push(`replay of a key over its share`);
    for (const c of ctx.hub.connections()) {
      if (c.orphaned > MAX_ORPHANS) budgetBreaches.push(`orphans ${c.orphaned} > ${MAX_ORPHANS}`);
      if (c.inFlight - c.orphaned > ctx.config.maxInFlight) budgetBreaches.push('in flight over --max-in-flight');
    }
  };

  await sleep(500);
  const before = await figures();
  console.log(`churn: ${PHONES} phones, ${DURATION_S} s of churn, then ≤ ${SETTLE_MS / 1000} s of silence`);
  console.log('before', JSON.stringify(before));

  const headers = (token: string, sid?: string, accept = 'application/json, text/event-stream') => ({
    'content-type': 'application/json',
    accept,
    'x-api-key': token,
    'mcp-protocol-version': '2025-11-25',
    ...(sid ? { 'mcp-session-id': sid } : {}),
  });
  const initialize = (token: string) => initializeSession(relay.mcpUrl, token, 'churn');
  // Ids unique within each session: a second request with the id of one in flight is refused
  // (docs/decisions/0216-duplicate-request-ids.md), and the abandoned calls below run beside others.
  let callId = 0;
  const call = (token: string, sid: string, name: string, args: unknown, signal?: AbortSignal, accept?: string) =>
    fetch(relay.mcpUrl, {
      method: 'POST',
      headers: headers(token, sid, accept),
      body: JSON.stringify({ jsonrpc: '2.0', id: ++callId, method: 'tools/call', params: { name, arguments: args } }),
      signal,
    })
      .then((r) => r.text())
      .catch(() => '');

  const counts = { sessions: 0, droppedStreams: 0, timeouts: 0, abandoned: 0, reconnects: 0, listChanged: 0 };
  const until = Date.now() + DURATION_S * 1000;
  let tick = 0;
  const during: Array<Awaited<ReturnType<typeof figures>>> = [];
  while (Date.now() < until) {
    tick++;
    const work: Array<Promise<unknown>> = [];
    for (let i = 0; i < phones.length; i++) {
      const token = keys[i].token;
      work.push(
        (async () => {
          // Abandoned sessions, each with a GET stream dropped while the phone notifies into it.
          const sid = await initialize(token);
          if (!sid) return;
          counts.sessions++;
          const ctl = new AbortController();
          const get = fetch(relay.mcpUrl, { headers: headers(token, sid, 'text/event-stream'), signal: ctl.signal })
            .then((r) => r.body?.getReader().read())
            .catch(() => undefined);
          await sleep(50);
          await call(token, sid, 'blob', { n: 20_000 }); // a big answer (JSON)
          await call(token, sid, 'notify', { text: 'x'.repeat(10_000) }); // a notification into the stream
          ctl.abort();
          await get;
          counts.droppedStreams++;
          // Calls that time out (the phone sleeps beyond --request-timeout-ms) and calls abandoned mid-way.
          if (tick % 3 === 0) {
            work.push(call(token, sid, 'sleep', { ms: REQUEST_TIMEOUT_MS + 1000 }).then(() => counts.timeouts++));
            const gone = new AbortController();
            work.push(call(token, sid, 'sleep', { ms: 1500 }, gone.signal, 'application/json'));
            setTimeout(() => gone.abort(), 200);
            counts.abandoned++;
          }
        })(),
      );
    }
    // A list_changed storm from one phone; one phone reconnects.
    if (tick % 5 === 0) {
      const server = servers.get(phones[tick % phones.length].deviceId);
      for (let j = 0; j < 200; j++) server?.sendToolListChanged();
      counts.listChanged += 200;
    }
    if (tick % 7 === 0) {
      const p = phones[tick % phones.length];
      work.push(
        (async () => {
          await agents.get(p.deviceId)!.stop();
          const agent = new DeviceAgent({
            stateDir: p.stateDir,
            createServer: () => {
              const s = createEchoServer();
              servers.set(p.deviceId, s);
              return s;
            },
            log: silentLogger,
            backoff: { baseMs: 50, capMs: 500 },
          });
          agents.set(p.deviceId, agent);
          agent.start();
          counts.reconnects++;
        })(),
      );
    }
    await Promise.all(work);
    checkBudgets();
    if (tick % 10 === 0) {
      const f = await figures();
      during.push(f);
      console.log(`during t+${Math.round((Date.now() - started) / 1000)}s`, JSON.stringify(f));
    }
  }
  const peak = await figures();
  console.log('end of churn', JSON.stringify(peak), JSON.stringify(counts));

  // Silence: no request at all. Sample until every figure is back (or the longest TTL passed).
  const quietFrom = Date.now();
  let after = peak;
  const back = (f: typeof peak) =>
    f.sessions === before.sessions &&
    f.replayBuffers === before.replayBuffers &&
    f.listeners === before.listeners &&
    f.sseStreams === before.sseStreams &&
    f.routerInFlight === 0 &&
    f.phonePending === 0 &&
    f.orphans === 0 &&
    Number(f.heapMB) <= Number(before.heapMB) * 1.25 + 8;
  while (Date.now() - quietFrom < SETTLE_MS) {
    await sleep(5000);
    checkBudgets();
    after = await figures();
    console.log(`after +${Math.round((Date.now() - quietFrom) / 1000)}s`, JSON.stringify(after));
    if (back(after) && Date.now() - quietFrom > SESSION_IDLE_MS) break;
  }
  const ok = back(after) && budgetBreaches.length === 0;
  console.log(
    `${ok ? 'PASS' : 'FAIL'}: heap ${before.heapMB} MB before, ${peak.heapMB} MB at the end of churn, ` +
      `${after.heapMB} MB ${Math.round((Date.now() - quietFrom) / 1000)} s after; budget breaches: ${budgetBreaches.length}` +
      (budgetBreaches.length ? ` (${[...new Set(budgetBreaches)].join('; ')})` : ''),
  );
  for (const a of agents.values()) await a.stop().catch(() => {});
  await relay.stop();
  process.exit(ok ? 0 : 1);
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
