// upgrade: a rolling upgrade under load. The revision given with --from is checked out in a
// temporary git worktree (its node_modules a symlink to this checkout's: nothing is installed),
// and three `phonebridge serve` nodes of it start on Redis (a fresh prefix) and Postgres (a
// fresh database) behind the local front (services/front.ts, a stand-in for the load
// balancer). Light phones connect through the front and MCP clients call them under load;
// then each old node in turn is taken out of the front, sent SIGTERM, drained until it exits,
// and replaced by a node of this working tree (which migrates the schema when it starts, as a
// pod of the new release does). Reported: calls failed by code, p99 during the roll, phones
// reconnected, and sessions kept (each client's session id still valid after the roll).
// Target: 0 failed calls, 0 lost sessions, every phone back; a miss exits non-zero.
//
//   npm run loadtest -- upgrade --from <git-rev> [--duration S] [--phones N] [--redis-url URL]
//
// --redis-url: the Redis both releases' nodes share (any topology the --from release reads;
// default PHONEBRIDGE_TEST_REDIS_URL or redis://127.0.0.1:6379). --target is refused: the
// scenario starts and stops the nodes itself.
// --duration is the steady load before and after the roll (half each); the roll takes as long
// as three drains and starts. See docs/OPERATIONS.md "Upgrading"
// (docs/decisions/0200-bus-and-record-format-versions.md).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { generateDeviceKey } from '../src/crypto/device-auth.ts';
import { startFront, type Front } from '../services/front.ts';
import { loadSurface } from './lib/light-phone.ts';
import { clientAgent, McpSession } from './lib/mcp-client.ts';
import { connectPhones, type Population } from './lib/phones.ts';
import { chooseStore, oneRedisUrl, SESSION_CHURN_FLAGS } from './lib/relay.ts';
import { redisCounter } from './lib/redis-commands.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';

const ROOT = realpathSync(fileURLToPath(new URL('..', import.meta.url)));
const NODES = 3;
/** The phone answers each call after this long, so calls are in flight when a node drains. */
const PHONE_DELAY_MS = 25;
const CLIENTS = 12;
const CALL_TIMEOUT_MS = 30_000;
/** Longest wait for a drained node to exit before it is killed (and the miss reported). */
const DRAIN_BOUND_MS = 45_000;
/** Longest wait for every phone to be back after a node was replaced. */
const PHONES_BACK_MS = 20_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** sleep that ends early once `stop()` says so (Ctrl-C). */
async function pause(ms: number, stop: () => boolean): Promise<void> {
  const until = performance.now() + ms;
  while (!stop() && performance.now() < until) await sleep(Math.min(100, until - performance.now()));
}

function git(args: string[]): string {
  return execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** The revision checked out in a temporary worktree, its node_modules this checkout's. */
function checkout(rev: string): { dir: string; sha: string; remove(): void } {
  let sha: string;
  try {
    sha = git(['rev-parse', '--verify', `${rev}^{commit}`]);
  } catch {
    throw new Error(`--from ${rev}: not a revision of this repository`);
  }
  const base = mkdtempSync(join(tmpdir(), 'pb-upgrade-'));
  const dir = join(base, 'tree');
  git(['worktree', 'add', '--detach', dir, sha]);
  const remove = () => {
    try {
      git(['worktree', 'remove', '--force', dir]);
    } catch {
      // already gone; prune below
    }
    rmSync(base, { recursive: true, force: true });
    try {
      git(['worktree', 'prune']);
    } catch {
      // nothing to prune
    }
  };
  try {
    symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(dir, 'node_modules'));
    if (!existsSync(join(dir, 'bin/phonebridge.mjs')) || !existsSync(join(dir, 'src/provisioning.ts')))
      throw new Error(`--from ${rev}: that revision has no bin/phonebridge.mjs or src/provisioning.ts to run`);
  } catch (err) {
    remove();
    throw err;
  }
  return { dir, sha, remove };
}

interface ServeNode {
  id: string;
  release: 'old' | 'new';
  proc: ChildProcess;
  port: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly alive: boolean;
  /** The last lines it wrote on stderr (warnings and errors). */
  tail: string[];
}

/** `phonebridge serve` of the tree at `dir`: what a pod of that release runs. */
async function startServe(dir: string, id: string, release: 'old' | 'new', flags: string[]): Promise<ServeNode> {
  const proc = spawn(process.execPath, [join(dir, 'bin/phonebridge.mjs'), 'serve', ...flags, '--node-id', id], {
    cwd: dir,
    env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn' },
    // stdin is a pipe with --exit-with-parent: the node drains and exits if this process dies.
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const tail: string[] = [];
  createInterface({ input: proc.stderr }).on('line', (l) => {
    tail.push(l);
    if (tail.length > 30) tail.shift();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    proc.once('exit', (code, signal) => r({ code, signal })),
  );
  const ready = await new Promise<{ port: number }>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`node ${id} did not start in 60 s: ${tail.slice(-5).join(' | ')}`));
    }, 60_000);
    createInterface({ input: proc.stdout }).on('line', (line) => {
      if (!line.startsWith('{"ready":')) return;
      clearTimeout(timer);
      resolve(JSON.parse(line) as { port: number });
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`node ${id} exited (${code ?? signal}) before ready: ${tail.slice(-5).join(' | ')}`));
    });
  });
  return {
    id,
    release,
    proc,
    port: ready.port,
    exited,
    tail,
    get alive() {
      return proc.exitCode === null && proc.signalCode === null;
    },
  };
}

/** Phones and keys registered by the old release's own code (it also makes the schema as it knows it). */
function registerWithOld(
  dir: string,
  databaseUrl: string,
  relay: string,
  count: number,
  publicKey: string,
): { ids: string[]; tokens: string[] } {
  const code = `
    import { openStore } from './src/store/index.ts';
    import { createKey, registerDevices } from './src/provisioning.ts';
    const a = JSON.parse(process.env.PB_UPGRADE_REGISTER);
    const { store, close } = await openStore({ databaseUrl: a.databaseUrl, dataDir: '', role: 'cli' });
    const ids = await registerDevices(store, { relay: a.relay, count: a.count, publicKey: a.publicKey, namePrefix: 'upgrade-' });
    const tokens = [];
    for (const id of ids) tokens.push((await createKey(store, id)).token);
    await close();
    process.stdout.write(JSON.stringify({ ids, tokens }));
  `;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, PB_UPGRADE_REGISTER: JSON.stringify({ databaseUrl, relay, count, publicKey }) },
    timeout: 120_000,
  });
  return JSON.parse(out) as { ids: string[]; tokens: string[] };
}

/** What a failed call is counted as: the relay's error code, else the HTTP status or the socket error. */
function failureCode(r: { status: number; json: any } | undefined, err?: unknown): string | undefined {
  if (err) return `transport:${(err as { code?: string }).code ?? (err as Error).message}`;
  if (!r) return 'no_answer';
  if (r.status !== 200) return `http_${r.status}`;
  const e = r.json?.error;
  if (e) return String(e.data?.code ?? e.code);
  if (!r.json?.result) return 'no_result';
  return undefined;
}

export const scenario: Scenario = {
  name: 'upgrade',
  description:
    'A rolling upgrade under load: three nodes of --from replaced one at a time (SIGTERM, drain, start) by the working tree',
  defaultDurationS: 10,
  thresholds: ['calls_failed:count==0', 'sessions_lost:count==0', 'phones_missing:value==0'],
  async run(ctx: ScenarioContext): Promise<void> {
    const from = ctx.opts.from;
    if (!from) throw new Error('upgrade needs --from <git-rev>: the revision to roll from');
    const phonesCount = Math.min(200, ctx.opts.phones ?? 24);
    const failed = ctx.metrics.counter('calls_failed');
    const lost = ctx.metrics.counter('sessions_lost');
    const missing = ctx.metrics.gauge('phones_missing');
    const okCalls = ctx.metrics.counter('calls_ok');
    const latency = ctx.metrics.trend('call_duration');
    const rollLatency = ctx.metrics.trend('roll_call_duration');
    const byCode = new Map<string, number>();
    let stopping = false;
    const onInt = () => (stopping = true);
    process.once('SIGINT', onInt);
    ctx.defer(() => process.off('SIGINT', onInt));

    // --- the old release, from its own worktree -----------------------------------------------
    const tree = checkout(from);
    ctx.defer(() => tree.remove());
    const head = git(['rev-parse', 'HEAD']);
    const dirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
    ctx.figures.from = tree.sha;
    ctx.figures.to = `${head}${dirty ? ' + uncommitted changes' : ''} (working tree)`;
    const store = await chooseStore();
    ctx.defer(() => store.drop());
    if (store.kind !== 'postgres') throw new Error('upgrade needs Postgres on 127.0.0.1:5432 (nodes share it)');
    const databaseUrl = store.flags[1];
    const prefix = `pbup:${randomBytes(4).toString('hex')}:`;
    const redisUrl = oneRedisUrl(ctx.opts);
    ctx.figures.redis = redisUrl.replace(/\/\/[^@/]*@/, '//…@'); // no password in the report
    // Whatever the topology (a Cluster's keys are on several masters): loadtest/lib/redis-commands.ts.
    ctx.defer(async () => {
      const r = await redisCounter(redisUrl);
      try {
        await r.dropPrefix(prefix);
      } finally {
        r.close();
      }
    });
    const front: Front = await startFront({ downForMs: 500 });
    ctx.defer(() => front.close());
    const dataDirs = mkdtempSync(join(tmpdir(), 'pb-upgrade-data-'));
    ctx.defer(() => rmSync(dataDirs, { recursive: true, force: true }));
    const flags = (id: string) => {
      mkdirSync(join(dataDirs, id), { recursive: true });
      return [
        '--host',
        '127.0.0.1',
        '--port',
        '0',
        '--admin-port',
        '0',
        '--public-url',
        front.url,
        '--data-dir',
        join(dataDirs, id),
        '--database-url',
        databaseUrl,
        '--redis-url',
        redisUrl,
        '--redis-prefix',
        prefix,
        '--exit-with-parent',
        ...SESSION_CHURN_FLAGS,
      ];
    };
    const nodes: ServeNode[] = [];
    const killAll = () => {
      for (const n of nodes) if (n.alive) n.proc.kill('SIGKILL');
    };
    process.once('exit', killAll);
    ctx.defer(async () => {
      process.off('exit', killAll);
      await Promise.all(
        nodes.map(async (n) => {
          if (!n.alive) return;
          const t = setTimeout(() => n.proc.kill('SIGKILL'), 10_000);
          n.proc.kill('SIGTERM');
          await n.exited;
          clearTimeout(t);
        }),
      );
    });
    const syncFront = () =>
      front.setBackends(nodes.filter((n) => n.alive).map((n) => ({ host: '127.0.0.1', port: n.port })));

    ctx.setNote(`registering ${phonesCount} phones with ${tree.sha.slice(0, 7)}'s code`);
    const keyPair = generateDeviceKey();
    const reg = registerWithOld(tree.dir, databaseUrl, front.url, phonesCount, keyPair.publicKeySpkiBase64);
    // At once, as a fresh Deployment's pods start (the advisory lock orders their migrations).
    ctx.setNote(`starting ${NODES} nodes of ${tree.sha.slice(0, 7)}`);
    const started = await Promise.allSettled(
      Array.from({ length: NODES }, (_, i) => startServe(tree.dir, `old-${i}`, 'old', flags(`old-${i}`))),
    );
    for (const s of started) if (s.status === 'fulfilled') nodes.push(s.value);
    const notStarted = started.find((s) => s.status === 'rejected');
    if (notStarted) throw notStarted.reason;
    syncFront();

    // --- phones and clients ---------------------------------------------------------------------
    let closes1012 = 0;
    let reconnects = 0;
    const reconnected = new Set<string>();
    const population: Population = await connectPhones({
      relay: { url: front.url, devices: () => Promise.resolve(reg.ids) },
      count: phonesCount,
      surface: loadSurface(),
      keyPair,
      concurrency: 8,
      onCall: (c) => {
        setTimeout(
          () => c.reply({ content: [{ type: 'text', text: typeof c.args.text === 'string' ? c.args.text : 'ok' }] }),
          PHONE_DELAY_MS,
        );
      },
      onClose: (_p, code) => {
        if (code === 1012) closes1012++;
      },
      // The reference agent reconnects within about a second (src/device/agent/backoff.ts).
      reconnectDelayMs: () => 100 + Math.random() * 400,
      onReconnected: (p) => {
        reconnects++;
        reconnected.add(p.deviceId);
      },
    });
    ctx.defer(() => population.closeAll());
    ctx.setPhones(() => population.connected());

    const agent = clientAgent(CLIENTS * 2);
    ctx.defer(() => agent.destroy());
    const clients = await Promise.all(
      Array.from({ length: CLIENTS }, (_, i) =>
        new McpSession(front.url, reg.tokens[i % phonesCount], agent).initialize(),
      ),
    );
    const sessionIds = clients.map((c) => c.sessionId);
    const sessionsLost = new Set<number>();
    let rolling = false;
    let loadOn = true;
    const callOnce = async (i: number): Promise<boolean> => {
      const c = clients[i];
      const t0 = performance.now();
      let r: Awaited<ReturnType<McpSession['call']>> | undefined;
      let err: unknown;
      try {
        r = await c.call('echo', { text: `c${i}` }, { timeoutMs: CALL_TIMEOUT_MS });
      } catch (e) {
        err = e;
      }
      const ms = performance.now() - t0;
      const code = failureCode(r, err);
      if (code === undefined) {
        okCalls.add();
        latency.add(ms);
        if (rolling) rollLatency.add(ms);
        return true;
      }
      failed.add();
      byCode.set(code, (byCode.get(code) ?? 0) + 1);
      if (code === 'http_404') sessionsLost.add(i);
      const said = (r?.json as { error?: { message?: string } } | undefined)?.error?.message;
      ctx.log(
        `client ${i} call failed after ${Math.round(ms)} ms: ${code}${said ? ` (${said})` : ''}` +
          `${rolling ? ' during the roll' : ''}; phones connected: ${population.connected()}`,
      );
      return false;
    };
    const loops = clients.map(async (_c, i) => {
      while (loadOn && !stopping) {
        await callOnce(i);
        await sleep(5);
      }
    });

    // --- the roll -------------------------------------------------------------------------------
    ctx.beginLoad();
    const half = (ctx.durationS * 1000) / 2;
    ctx.setNote(`load on ${NODES} nodes of ${tree.sha.slice(0, 7)}`);
    await pause(half, () => stopping);
    const steps: Array<Record<string, unknown>> = [];
    const rollStarted = performance.now();
    rolling = true;
    for (let i = 0; i < NODES && !stopping; i++) {
      const old = nodes[i];
      ctx.setNote(`draining ${old.id}`);
      const t0 = performance.now();
      // Out of the load balancer's rotation first, as Kubernetes takes a terminating pod out of
      // the Service's endpoints; then SIGTERM.
      front.setBackends(nodes.filter((n) => n.alive && n !== old).map((n) => ({ host: '127.0.0.1', port: n.port })));
      old.proc.kill('SIGTERM');
      const timer = setTimeout(() => old.proc.kill('SIGKILL'), DRAIN_BOUND_MS);
      const exit = await old.exited;
      clearTimeout(timer);
      const drainedMs = performance.now() - t0;
      if (exit.code !== 0)
        ctx.note(`${old.id} did not exit cleanly: ${exit.code ?? exit.signal}; ${old.tail.slice(-3).join(' | ')}`);
      ctx.setNote(`starting new-${i}`);
      const t1 = performance.now();
      const fresh = await startServe(ROOT, `new-${i}`, 'new', flags(`new-${i}`));
      nodes[i] = fresh;
      nodes.push(old); // still listed for cleanup and logs
      syncFront();
      const startedMs = performance.now() - t1;
      const backBy = performance.now() + PHONES_BACK_MS;
      while (population.connected() < phonesCount && performance.now() < backBy && !stopping) await sleep(50);
      steps.push({
        replaced: old.id,
        by: fresh.id,
        exit: exit.code ?? exit.signal,
        drainS: +(drainedMs / 1000).toFixed(2),
        startS: +(startedMs / 1000).toFixed(2),
        phonesBack: population.connected(),
      });
      ctx.log(
        `${old.id} → ${fresh.id}: drained in ${(drainedMs / 1000).toFixed(1)} s, started in ${(startedMs / 1000).toFixed(1)} s`,
      );
    }
    rolling = false;
    const rollS = (performance.now() - rollStarted) / 1000;
    ctx.setNote('load on the new nodes');
    await pause(half, () => stopping);
    loadOn = false;
    await Promise.all(loops);

    // --- what is left -----------------------------------------------------------------------------
    // Every session still valid: one more call with each client's original session id.
    for (let i = 0; i < clients.length; i++) {
      if (clients[i].sessionId !== sessionIds[i]) sessionsLost.add(i);
      if (!(await callOnce(i))) sessionsLost.add(i);
    }
    lost.add(sessionsLost.size);
    const back = population.connected();
    missing.set(phonesCount - back);
    const oldLeft = nodes.filter((n) => n.release === 'old' && n.alive).length;
    if (oldLeft) ctx.note(`${oldLeft} old node(s) still running after the roll`);

    ctx.figures.roll = {
      seconds: +rollS.toFixed(1),
      steps,
      callsOk: okCalls.count,
      callsFailed: failed.count,
      failedByCode: Object.fromEntries(byCode),
      p99DuringRollMs: +rollLatency.percentile(99).toFixed(1),
      p99OverallMs: +latency.percentile(99).toFixed(1),
      phones: phonesCount,
      phonesClosedWith1012: closes1012,
      phonesReconnected: reconnected.size,
      reconnects,
      phonesBack: back,
      sessions: clients.length,
      sessionsKept: clients.length - sessionsLost.size,
    };
    ctx.target({ name: 'calls failed', goal: '0', actual: failed.count, unit: 'calls', met: failed.count === 0 });
    ctx.target({
      name: 'sessions lost',
      goal: '0',
      actual: sessionsLost.size,
      unit: 'sessions',
      met: sessionsLost.size === 0,
    });
    ctx.target({
      name: 'phones back',
      goal: `${phonesCount}`,
      actual: back,
      unit: 'phones',
      met: back === phonesCount,
    });
    ctx.note(
      `rolled ${tree.sha.slice(0, 7)} → working tree in ${rollS.toFixed(1)} s: ${okCalls.count} calls ok, ${failed.count} failed` +
        `${byCode.size ? ` (${[...byCode].map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''}; p99 during the roll ` +
        `${rollLatency.percentile(99).toFixed(0)} ms; ${reconnected.size}/${phonesCount} phones reconnected, ${back} back; ` +
        `${clients.length - sessionsLost.size}/${clients.length} sessions kept`,
    );
  },
  refusesTarget: 'it starts the nodes of --from and of this tree and stops them itself',
  validate: (opts) => void oneRedisUrl(opts),
};
