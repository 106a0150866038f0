// `npm run loadtest -- instructions [--rounds N] [--window-ms MS] [--warm-ms MS] [--conns N]
//                                   [--instrumented-warm-ms MS] [--functions N] [--cluster]
//                                   [--distinct-args] [--out DIR]`:
// instructions per small call (`tools/call` of the reference phone's `echo`) in the one-node
// relay and in the uWS floor (loadtest/baseline/uws-floor.ts), counted by valgrind's callgrind.
// Each call repeats the last but for its id; with --distinct-args each carries another text, so
// that no request is read as the last one again (docs/decisions/0259-a-request-read-as-the-last-one-again.md).
// With --cluster, also a cross-node call: two relay nodes on Postgres and Redis (as
// relay-overhead's `cluster` target), the phone on node a, the client on node b; its count is
// both nodes' main threads, so cluster ÷ relay is relay-overhead's "two nodes ÷ one" in
// instructions.
//
// Why beside relay-overhead's CPU times: a count of instructions does not depend on what else
// the machine runs, so one tree against another, or the relay against the floor, separates by
// a few per cent where CPU times here move by a fifth or more between runs of the same code
// (docs/BENCHMARKS.md, "Instructions per call"). What it leaves out is the kernel's part (the
// same syscalls for both: relay-overhead counts them) and how fast each instruction runs.
//
// How: both servers run under `valgrind --tool=callgrind --instr-atstart=no`; the phone and the
// load generator (relay-overhead's roles) run outside it. Each server is warmed up
// uninstrumented, then instrumented until its count per call is steady and its helper threads
// quiet; then alternating measured windows, each after a lead-in of calls, zeroed before
// and dumped after (`callgrind_control -z`, `-d`), and last three idle windows each (the timers,
// the store's journal poll). A window's count net of the median idle rate, over its calls, is the
// figure; the main thread apart from V8's and the store's helper threads (callgrind serialises
// threads, so the helpers' share of a window is not what it is on two cores: read the main
// thread). With --functions N both run with --perf-basic-prof and the last window's main
// thread is listed by function, JavaScript named from the perf map.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { forkChild, type Child } from './lib/ipc-child.ts';
import { probedSession } from './lib/probed-session.ts';
import { medianOf } from './lib/runs.ts';
import { startRelayChild, type RelayChild } from './fleet-relay.ts';
import { createDatabase } from './lib/scratch-database.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ROLES = join(ROOT, 'loadtest/relay-overhead.ts');
const MAX_WARM_WINDOWS = 8;
const CLUSTER_WARM = 3;
const STEADY = 0.05;
const LEAD_IN_MS = 10_000;
/** Idle windows per target after the rounds; their median rate is taken off. */
const IDLE_WINDOWS = 3;
const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A dump's instruction count per thread, from callgrind's files `<base>.<dump>-<thread>`. */
export function threadTotals(dir: string, base: string, dump: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const f of readdirSync(dir)) {
    const m = new RegExp(`^${base}\\.${dump}-(\\d+)$`).exec(f);
    if (!m) continue;
    const t = /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(dir, f), 'utf8'));
    out.set(Number(m[1]), t ? Number(t[1]) : 0);
  }
  return out;
}

/** Per call net of idle: `(count - idlePerMs * ms) / calls`. */
export function netPerCall(count: number, idlePerMs: number, ms: number, calls: number): number {
  return calls > 0 ? (count - idlePerMs * ms) / calls : NaN;
}

interface PerfMapEntry {
  start: number;
  end: number;
  name: string;
}

/** `/tmp/perf-PID.map` (start size name, hex), the latest entry for a start winning. */
export function readPerfMap(text: string): PerfMapEntry[] {
  const byStart = new Map<number, PerfMapEntry>();
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (!m) continue;
    const start = parseInt(m[1], 16);
    byStart.set(start, { start, end: start + parseInt(m[2], 16), name: m[3] });
  }
  return [...byStart.values()].sort((a, b) => a.start - b.start);
}

export function perfMapName(map: PerfMapEntry[], addr: number): string | undefined {
  let lo = 0;
  let hi = map.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (map[mid].start <= addr) lo = mid + 1;
    else hi = mid - 1;
  }
  const e = map[hi];
  return e && addr < e.end ? e.name : undefined;
}

/** Self instructions by function, from `callgrind_annotate`'s listing, JIT addresses named through `map`. */
export function byFunction(annotated: string, map: PerfMapEntry[]): Array<{ name: string; ir: number }> {
  const rows = new Map<string, number>();
  let total = Infinity;
  for (const line of annotated.split('\n')) {
    const m = /^\s*([\d,]+) \([ \d.]+%\)\s+(.*)$/.exec(line);
    if (!m) continue;
    const ir = Number(m[1].replace(/,/g, ''));
    if (m[2].startsWith('PROGRAM TOTALS')) {
      total = ir;
      continue;
    }
    // A window zeroed and dumped mid-run lists the frames below the event loop (main, uv_run)
    // with the whole window as their own: not a function's cost.
    if (ir >= total) continue;
    let name = m[2];
    const jit = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(name);
    if (jit) {
      const js = perfMapName(map, parseInt(jit[1], 16));
      name = js ? js.replace(`file://${ROOT}`, '') : '[JIT code, unnamed]';
    } else name = name.replace(/^\?\?\?:/, '').replace(/^.*?:(?=[^/]*\[)/, '');
    rows.set(name, (rows.get(name) ?? 0) + ir);
  }
  return [...rows.entries()].map(([name, ir]) => ({ name, ir })).sort((a, b) => b.ir - a.ir);
}

interface Target {
  name: 'relay' | 'floor' | 'cluster';
  /** The processes a call runs in (the cluster's: the phone's node, then the client's), each under callgrind. */
  pids: number[];
  url: string;
  headers: Record<string, string>;
  dumps: number;
}

interface Window {
  target: string;
  calls: number;
  ms: number;
  mainPerCall: number;
  helpersPerCall: number;
  /** The main thread per call of each of the target's processes, in `pids` order. */
  mainPerCallByProcess: number[];
}

function options() {
  return parseArgs({
    strict: true,
    options: {
      rounds: { type: 'string', default: '4' },
      'window-ms': { type: 'string', default: '10000' },
      'warm-ms': { type: 'string', default: '60000' },
      conns: { type: 'string', default: '4' },
      functions: { type: 'string', default: '0' },
      out: { type: 'string', default: join(ROOT, 'loadtest-results/instructions') },
      'instrumented-warm-ms': { type: 'string', default: '10000' },
      cluster: { type: 'boolean', default: false },
      'distinct-args': { type: 'boolean', default: false },
    },
  });
}

async function main(): Promise<void> {
  let values: ReturnType<typeof options>['values'];
  try {
    ({ values } = options());
  } catch (err) {
    // Unknown flags (--target among them: the servers measured are the ones it starts).
    console.error(`instructions: ${(err as Error).message}; it starts and measures its own relay and floor`);
    process.exit(64);
  }
  const counts = ['rounds', 'window-ms', 'warm-ms', 'conns', 'functions', 'instrumented-warm-ms'] as const;
  for (const k of counts)
    if (!/^\d+$/.test(values[k]) || (k !== 'functions' && Number(values[k]) === 0)) {
      console.error(
        `instructions: --${k} takes a whole number${k === 'functions' ? '' : ' above 0'}, not "${values[k]}"`,
      );
      process.exit(64);
    }
  for (const tool of ['valgrind', 'callgrind_control'])
    if (spawnSync(tool, ['--version']).error) {
      console.error(`instructions: ${tool} not found (Debian: apt-get install valgrind)`);
      process.exit(2);
    }
  const rounds = Number(values.rounds);
  const windowMs = Number(values['window-ms']);
  const conns = Number(values.conns);
  const functions = Number(values.functions);
  const out = values.out;

  const dir = mkdtempSync(join(tmpdir(), 'pb-instructions-'));
  const wrapper = join(dir, 'node-under-callgrind.sh');
  const vg = ['-q', '--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', '--separate-threads=yes'];
  writeFileSync(
    wrapper,
    `#!/bin/sh\nexec valgrind ${vg.join(' ')} --callgrind-out-file=${dir}/cg.%p ${process.execPath} "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  // Extra node flags for both servers, as relay-overhead takes them (e.g. '--trace-deopt').
  const extraArgs = (process.env.PHONEBRIDGE_LOADTEST_RELAY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const execArgv = [...(functions > 0 ? ['--perf-basic-prof'] : []), ...extraArgs];
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const s of stops.reverse()) await s().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('SIGINT', () => void stopAll().finally(() => process.exit(130)));
  try {
    // The control journal's poll (every 250 ms by default) runs an embedded Postgres query each
    // time, about half of the relay's idle instructions under valgrind; the idle rate taken off
    // each window read 3.7–4.6 million per second between runs, ±2.5 thousand per call. No call
    // reads the journal, so the measured relay polls once a minute.
    const relay: RelayChild = await startRelayChild(
      ['--port', '0', '--data-dir', join(dir, 'relay'), '--control-poll-ms', '60000'],
      {
        execPath: wrapper,
        execArgv,
        startTimeoutMs: 600_000,
      },
    );
    stops.push(() => relay.stop());
    const floorCode = randomBytes(6).toString('hex');
    const floor: Child = forkChild(
      join(ROOT, 'loadtest/baseline/uws-floor.ts'),
      ['--code', floorCode],
      execArgv,
      wrapper,
    );
    stops.push(() => floor.stop());
    const floorReady = await floor.next('ready', 600_000);
    const phone = forkChild(ROLES, ['--role', 'phone']);
    stops.push(() => phone.stop());
    await phone.next('ready');
    const load = forkChild(ROLES, ['--role', 'load']);
    stops.push(() => load.stop());

    const [qr] = await relay.pair(1);
    const deviceId: string = await phone.call({ op: 'pair', qr }, 600_000);
    await phone.call({ op: 'pair', qr: { v: 1, relay: floorReady.url, code: floorCode } }, 600_000);
    await floor.next('phone', 600_000);
    const [{ token }] = await relay.keys([deviceId]);
    for (let i = 0; i < 600 && !(await relay.connections()).some((c) => c.initialized); i++)
      await new Promise((r) => setTimeout(r, 100));
    const targets: Target[] = [
      {
        name: 'relay',
        pids: [relay.child.pid!],
        url: relay.mcpUrl,
        headers: await probedSession(relay.mcpUrl, { 'x-api-key': token }, 'instructions'),
        dumps: 0,
      },
      {
        name: 'floor',
        pids: [floor.proc.pid!],
        url: `${floorReady.url}/mcp`,
        headers: await probedSession(`${floorReady.url}/mcp`, {}, 'instructions'),
        dumps: 0,
      },
    ];
    if (values.cluster) {
      const db = await createDatabase('pb_instructions');
      stops.push(() => db.drop());
      const prefix = `pbi:${randomBytes(4).toString('hex')}:`;
      const flags = ['--port', '0', '--database-url', db.url, '--redis-url', REDIS_URL, '--redis-prefix', prefix];
      flags.push('--control-poll-ms', '60000'); // as the one-node relay's, above
      const nodeOpts = { execPath: wrapper, execArgv, startTimeoutMs: 600_000 };
      const a = await startRelayChild([...flags, '--node-id', 'instr-a'], nodeOpts);
      stops.push(() => a.stop());
      const b = await startRelayChild([...flags, '--node-id', 'instr-b'], nodeOpts);
      stops.push(() => b.stop());
      const [qrA] = await a.pair(1);
      const clusterDevice: string = await phone.call({ op: 'pair', qr: qrA }, 600_000);
      const [{ token: clusterToken }] = await a.keys([clusterDevice]);
      for (let i = 0; i < 600 && !(await a.connections()).some((c) => c.initialized); i++)
        await new Promise((r) => setTimeout(r, 100));
      targets.push({
        name: 'cluster',
        pids: [a.child.pid!, b.child.pid!],
        url: b.mcpUrl,
        headers: await probedSession(b.mcpUrl, { 'x-api-key': clusterToken }, 'instructions'),
        dumps: 0,
      });
    }
    const ctl = (t: Target, ...args: string[]) => {
      for (const pid of t.pids)
        execFileSync('callgrind_control', [...args, String(pid)], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        });
    };
    const run = async (t: Target, ms: number) => {
      const r = await load.call<{ calls: number; errors: number; ms: number }>(
        {
          op: 'run',
          job: { url: t.url, headers: t.headers, tool: 'echo', ms, conns, distinctArgs: values['distinct-args'] },
        },
        ms + 600_000,
      );
      if (r.errors) throw new Error(`${t.name}: ${r.errors} of ${r.calls} calls failed`);
      return r;
    };
    /** Zero, run `work` (resolving to its calls), dump: the window's count per process and thread, its length and calls. */
    const window = async (t: Target, work: () => Promise<number>) => {
      ctl(t, '-z');
      const t0 = performance.now();
      const calls = await work();
      const ms = performance.now() - t0;
      ctl(t, '-d', `w${t.dumps + 1}`);
      t.dumps++;
      return { threads: t.pids.map((pid) => threadTotals(dir, `cg.${pid}`, t.dumps)), ms, calls };
    };
    const calling = (t: Target, ms: number) => async () => (await run(t, ms)).calls;

    /** A window's counts: the main threads (callgrind's thread 1 of each process), each and summed, and the rest together. */
    const split = (byProcess: Array<Map<number, number>>) => {
      const mains = byProcess.map((threads) => threads.get(1) ?? 0);
      return {
        main: mains.reduce((s, m) => s + m, 0),
        mains,
        helpers: byProcess.reduce(
          (sum, threads) => sum + [...threads.entries()].reduce((s, [k, v]) => s + (k === 1 ? 0 : v), 0),
          0,
        ),
      };
    };
    // Warm: uninstrumented first, then instrumented windows until the helper threads are quiet
    // (under a quarter of the main thread's count: TurboFan no longer compiling the hot path,
    // which under valgrind takes many more calls than natively) and the main thread's count per
    // call is steady (within STEADY of the window before), at most MAX_WARM_WINDOWS. A cross-node
    // call runs under valgrind twice, at a sixth of the one-node relay's rate: its uninstrumented
    // warm-up is CLUSTER_WARM times as long (with the first run's one, code still in Sparkplug
    // at its third window and V8's compiler thread busier than the main one).
    // The relay last, so that round 1 (the relay's first) follows its warm-up at once: idle for
    // the floor's warm-up, its key would leave the auth cache (30 s) and the first call take the
    // general path, deoptimising the hot code again.
    for (const t of [...targets].reverse()) {
      const warm = await run(t, Number(values['warm-ms']) * (t.name === 'cluster' ? CLUSTER_WARM : 1));
      ctl(t, '-i', 'on');
      let calls = 0;
      let windows = 0;
      let lastPerCall = NaN; // no window before the first: never steady at once
      for (let steady = false; !steady && windows < MAX_WARM_WINDOWS; windows++) {
        const w = await window(t, calling(t, Number(values['instrumented-warm-ms'])));
        const { main, helpers } = split(w.threads);
        calls += w.calls;
        const perCall = main / Math.max(1, w.calls);
        steady = helpers < main / 4 && Math.abs(perCall - lastPerCall) <= STEADY * lastPerCall;
        lastPerCall = perCall;
      }
      console.log(`${t.name}: warmed up with ${warm.calls} calls, then ${calls} instrumented in ${windows} windows`);
    }
    const raw: Array<{ target: string; calls: number; ms: number; main: number; mains: number[]; helpers: number }> =
      [];
    /** Each target's dump of its last measured window (for the listing by function). */
    const lastMeasuredDump = new Map<string, number>();
    for (let round = 0; round < rounds; round++)
      for (const t of round % 2 ? [...targets].reverse() : targets) {
        // Calls before the window, not counted: after the other targets' windows (and, before
        // round 1, their warm-ups) this one's key may have left the auth cache (30 s) and V8 may
        // have dropped code it had not run since; the recompiling, on V8's helper threads and in
        // the main thread's slower tiers, is meant to happen here, not in the window (with a 2-s
        // lead-in, the cluster's first window still read 198–230 thousand instructions per call
        // against 175–192 in the others, its helpers 96–308 thousand). Instrumented: turning
        // callgrind's instrumentation off and on again flushes its translations, and the window
        // after it served a third to a half of the calls while they were made again.
        await run(t, LEAD_IN_MS);
        const w = await window(t, calling(t, windowMs));
        raw.push({ target: t.name, calls: w.calls, ms: w.ms, ...split(w.threads) });
        lastMeasuredDump.set(t.name, t.dumps);
        console.log(`round ${round + 1} ${t.name}: ${w.calls} calls`);
      }
    // The idle rate after the rounds, not between the warm-up and them: an idle window lets the
    // collector free what the hot code was optimised against, and the first measured window
    // would then pay for its recompilation ("weak objects" in --trace-deopt).
    // Three idle windows each, the median taken off: one window may hold what idleness itself
    // sets off (the collector's memory reducer, a journal read) and another not, and one such
    // window moved a run's one-node figure by 2.7 thousand a call (docs/BENCHMARKS.md, "One clock
    // reading per request").
    const idleRates = new Map<string, Array<{ main: number; mains: number[]; helpers: number }>>();
    for (let k = 0; k < IDLE_WINDOWS; k++)
      for (const t of targets) {
        const w = await window(t, () => new Promise<number>((r) => setTimeout(() => r(0), windowMs)));
        const { main, mains, helpers } = split(w.threads);
        const rates = idleRates.get(t.name) ?? [];
        rates.push({ main: main / w.ms, mains: mains.map((m) => m / w.ms), helpers: helpers / w.ms });
        idleRates.set(t.name, rates);
      }
    const idle = new Map<string, { main: number; mains: number[]; helpers: number }>();
    for (const [name, rates] of idleRates) {
      const i = {
        main: medianOf(rates.map((r) => r.main)),
        mains: rates[0].mains.map((_, k) => medianOf(rates.map((r) => r.mains[k]))),
        helpers: medianOf(rates.map((r) => r.helpers)),
      };
      idle.set(name, i);
      const perSecond = rates.map((r) => Math.round(r.main * 1000)).join(', ');
      console.log(`${name} idle: ${Math.round(i.main * 1000)} instructions/s on the main thread [${perSecond}]`);
    }
    const windows: Window[] = raw.map((r) => {
      const i = idle.get(r.target)!;
      return {
        target: r.target,
        calls: r.calls,
        ms: Math.round(r.ms),
        mainPerCall: Math.round(netPerCall(r.main, i.main, r.ms, r.calls)),
        helpersPerCall: Math.round(netPerCall(r.helpers, i.helpers, r.ms, r.calls)),
        mainPerCallByProcess: r.mains.map((m, k) => Math.round(netPerCall(m, i.mains[k], r.ms, r.calls))),
      };
    });
    for (const w of windows)
      console.log(
        `${w.target}: ${w.calls} calls, ${w.mainPerCall} instructions per call on the main thread${w.mainPerCallByProcess.length > 1 ? ` (${w.mainPerCallByProcess.join(' + ')})` : ''}, ${w.helpersPerCall} on helpers`,
      );
    const summary = Object.fromEntries(
      targets.map((t) => {
        const ws = windows.filter((w) => w.target === t.name);
        return [
          t.name,
          {
            mainPerCall: medianOf(ws.map((w) => w.mainPerCall)),
            helpersPerCall: medianOf(ws.map((w) => w.helpersPerCall)),
            mainPerCallByProcess: t.pids.map((_, k) => medianOf(ws.map((w) => w.mainPerCallByProcess[k]))),
          },
        ];
      }),
    );
    const ratio = summary.relay.mainPerCall / summary.floor.mainPerCall;
    console.log(
      `\nmain thread, median instructions per call: relay ${summary.relay.mainPerCall}, floor ${summary.floor.mainPerCall}: relay ÷ floor ${ratio.toFixed(2)}`,
    );
    const clusterOverRelay = summary.cluster ? summary.cluster.mainPerCall / summary.relay.mainPerCall : undefined;
    if (summary.cluster)
      console.log(
        `cross-node, both nodes' main threads: ${summary.cluster.mainPerCall} (the phone's node ${summary.cluster.mainPerCallByProcess[0]}, the client's ${summary.cluster.mainPerCallByProcess[1]}): cluster ÷ relay ${clusterOverRelay!.toFixed(2)}`,
      );

    const listed: Record<string, Array<{ name: string; perCall: number }>> = {};
    // A listing per process: the cluster's as cluster-a (the phone's node) and cluster-b (the client's).
    const listings = targets.flatMap((t) =>
      t.pids.map((pid, k) => ({ t, pid, name: t.pids.length > 1 ? `${t.name}-${'ab'[k]}` : t.name })),
    );
    if (functions > 0)
      for (const { t, pid, name } of listings) {
        // The last measured window (the idle ones came after it).
        const last = windows.filter((w) => w.target === t.name).at(-1)!;
        const file = join(dir, `cg.${pid}.${lastMeasuredDump.get(t.name)}-01`);
        const annotated = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', file], {
          encoding: 'utf8',
          maxBuffer: 1 << 28,
        });
        const mapFile = `/tmp/perf-${pid}.map`;
        const map = existsSync(mapFile) ? readPerfMap(readFileSync(mapFile, 'utf8')) : [];
        // Kept for `callgrind_annotate --tree=caller` and the like (JIT code by its perf map).
        mkdirSync(out, { recursive: true });
        copyFileSync(file, join(out, `${name}.callgrind`));
        if (existsSync(mapFile)) copyFileSync(mapFile, join(out, `${name}.perf.map`));
        const rows = byFunction(annotated, map);
        // JavaScript by V8's tier: * TurboFan, + Maglev, ^ Sparkplug, ~ the interpreter. Hot code
        // outside TurboFan in a measured window means the warm-up did not reach steady state.
        const tiers: Record<string, number> = {};
        for (const r of rows) {
          const tier = /^JS:([*+^~]?)/.exec(r.name)?.[1];
          if (tier !== undefined)
            tiers[tier || 'builtin'] = (tiers[tier || 'builtin'] ?? 0) + Math.round(r.ir / last.calls);
        }
        console.log(`\n${name}: JavaScript's instructions per call by tier ${JSON.stringify(tiers)}`);
        listed[name] = rows.slice(0, functions).map((r) => ({ name: r.name, perCall: Math.round(r.ir / last.calls) }));
        console.log(
          `\n${name}, its last window's main thread by function (self, instructions per call, not net of idle):`,
        );
        for (const r of listed[name]) console.log(`${String(r.perCall).padStart(8)}  ${r.name}`);
      }
    mkdirSync(out, { recursive: true });
    const report = { windowMs, conns, windows, summary, relayOverFloor: ratio, clusterOverRelay, functions: listed };
    writeFileSync(join(out, 'report.json'), JSON.stringify(report, null, 2));
    console.log(`report: ${join(out, 'report.json')}`);
    if (functions > 0) for (const { pid } of listings) rmSync(`/tmp/perf-${pid}.map`, { force: true });
  } finally {
    await stopAll();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  main().catch((err) => {
    console.error(`instructions: ${(err as Error).stack ?? err}`);
    process.exit(1);
  });
