// `node --import tsx loadtest/cross-node-ab.bench.ts --trees DIR_A,DIR_B [--rounds 6] [--ms 2500]
// [--rate 1200] [--conns 32]`: a cross-node call's cost in two checkouts of this repository,
// side by side in one run (docs/BENCHMARKS.md, "Pub/sub messages read directly"). Per
// checkout, two phonebridge nodes on the same Redis and Postgres (each checkout's own
// loadtest/fleet-relay.ts, so each runs its own src/), a reference phone on the first; per
// round and checkout, a closed loop and a fixed open-loop rate, the client on the second node
// (`cross`) and on the first (`same`), in alternating order. Reports the two nodes' CPU per
// call (phone's node, origin), calls/s and p50; the closed-loop share and added p50 as
// relay-overhead defines them.
//
// Faster than relay-overhead (about a minute for six rounds), with none of its other targets:
// for A/B rounds of a change to the cross-node path. Each checkout needs its node_modules
// (a symlink to this one's will do). One DIR alone measures that checkout.
//
// Each checkout has its own phone process. With one phone serving both, the first checkout read
// up to 20 µs more per closed-loop call than the second even when both were one commit
// (docs/BENCHMARKS.md, "Counted publishes on the quiet connection"); with a phone each, 4 µs,
// inside the spread between rounds. Run an A/B in both orders of the checkouts all the same:
// with cross-node rounds alone the second checkout's origin has also read 1–25 µs dearer,
// whichever commit it held (docs/BENCHMARKS.md, "Two harnesses, one commit").
//   XONLY=cross|same     only those targets
//   XNODE_ARGS='…'       node flags for the relay children (e.g. --trace-gc)
//   PHONEBRIDGE_LOADTEST_RELAY_PROFILE_DIR=DIR [PHONEBRIDGE_LOADTEST_RELAY_HEAP_PROFILE=…]
//                        a CPU (and heap) profile per node and measured run, named
//                        p-<target>-<closed|rate>-<phone|origin>-calls<N>-<pid>
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { RelayChild, startRelayChild as StartRelayChild } from './fleet-relay.ts';
import { forkChild } from './lib/ipc-child.ts';
import { processCpuTimeUs } from './lib/proc-cpu.ts';
import { probedSession } from './lib/probed-session.ts';
import { createDatabase } from './lib/scratch-database.ts';

type Json = any;

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// Its phone and load-generator roles (the reference agent; node:http keep-alive clients).
const ROLES = join(ROOT, 'loadtest/relay-overhead.ts');
const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

const { values } = parseArgs({
  options: {
    trees: { type: 'string', default: ROOT },
    rounds: { type: 'string', default: '6' },
    ms: { type: 'string', default: '2500' },
    rate: { type: 'string', default: '1200' },
    conns: { type: 'string', default: '32' },
  },
});
const trees = values.trees.split(',');
const rounds = Math.max(1, Math.min(20, Number(values.rounds)));
const roundMs = Math.max(500, Math.min(10_000, Number(values.ms)));
const rate = Math.max(50, Math.min(10_000, Number(values.rate)));
const conns = Math.max(1, Math.min(256, Number(values.conns)));
const profiling = !!process.env.PHONEBRIDGE_LOADTEST_RELAY_PROFILE_DIR;
// Bounded: setup, warm-up and every round, with room to spare.
const bound = setTimeout(
  () => {
    console.error('cross-node-ab: over its bound, giving up');
    process.exit(2);
  },
  60_000 + trees.length * (30_000 + rounds * 4 * (roundMs + 2000)),
);
bound.unref();

const child = (args: string[]) => forkChild(ROLES, args);

const session = (url: string, key: string) => probedSession(url, { 'x-api-key': key }, 'cross-node-ab');

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** The phone's node, then the other. */
  nodes: [RelayChild, RelayChild];
}

interface Result {
  callsPerSecond: number;
  /** CPU µs per call of the phone's node and of the other node. */
  byNode: [number, number];
  p50Ms: number;
  errors: number;
}

// A phone process per checkout: one process serving both would carry one checkout's calls
// on the socket it opened first.
const phones: Array<ReturnType<typeof child>> = [];
const load = child(['--role', 'load']);
const cleanup: Array<() => Promise<unknown>> = [];
const targets: Target[] = [];
try {
  for (const [i, tree] of trees.entries()) {
    const { startRelayChild } = (await import(join(tree, 'loadtest/fleet-relay.ts'))) as {
      startRelayChild: typeof StartRelayChild;
    };
    const db = await createDatabase('pb_cross_ab');
    cleanup.push(() => db.drop());
    const flags = ['--port', '0', '--database-url', db.url, '--redis-url', REDIS_URL];
    flags.push('--redis-prefix', `pbab:${randomBytes(3).toString('hex')}:`);
    const execArgv = (process.env.XNODE_ARGS ?? '').split(/\s+/).filter(Boolean);
    const a = await startRelayChild([...flags, '--node-id', `ab-a${i}`], { execArgv });
    cleanup.push(() => a.stop());
    const b = await startRelayChild([...flags, '--node-id', `ab-b${i}`], { execArgv });
    cleanup.push(() => b.stop());
    const [qr] = await a.pair(1);
    const phone = child(['--role', 'phone']);
    phones.push(phone);
    await phone.next('ready');
    const deviceId: string = await phone.call({ op: 'pair', qr });
    const [{ token }] = await a.keys([deviceId]);
    for (let k = 0; k < 100 && !(await a.connections()).some((c) => c.initialized); k++)
      await new Promise((r) => setTimeout(r, 50));
    const tag = trees.length > 1 ? `#${i}` : '';
    targets.push({ name: `cross${tag}`, url: b.mcpUrl, headers: await session(b.mcpUrl, token), nodes: [a, b] });
    targets.push({ name: `same${tag}`, url: a.mcpUrl, headers: await session(a.mcpUrl, token), nodes: [a, b] });
  }
  const only = process.env.XONLY;
  const measured = only ? targets.filter((t) => t.name.startsWith(only)) : targets;

  const run = async (
    t: Target,
    job: { ms: number; conns?: number; rate?: number },
    label?: string,
  ): Promise<Result> => {
    if (label) for (const n of t.nodes) await n.profile('between-runs');
    const pids = t.nodes.map((n) => n.child.pid!);
    const before = pids.map((p) => processCpuTimeUs(p));
    const r: Json = await load.call({ op: 'run', job: { ...job, url: t.url, headers: t.headers, tool: 'echo' } });
    const byNode = pids.map((p, i) => (processCpuTimeUs(p) - before[i]) / Math.max(1, r.calls)) as [number, number];
    if (label)
      for (const [i, n] of t.nodes.entries())
        await n.profile(`p-${t.name}-${label}-${i === 0 ? 'phone' : 'origin'}-calls${r.calls}`);
    return { callsPerSecond: (r.calls / r.ms) * 1000, byNode, p50Ms: r.p50, errors: r.errors };
  };

  for (const t of measured) await run(t, { ms: 1500, conns }); // warm-up
  const results: Record<string, Result[]> = {};
  for (let r = 0; r < rounds; r++) {
    // The order of the checkouts alternates from round to round.
    const order = r % 2 === 0 ? measured : [...measured].reverse();
    for (const t of order)
      (results[`${t.name} closed`] ??= []).push(await run(t, { ms: roundMs, conns }, profiling ? 'closed' : undefined));
    for (const t of order)
      (results[`${t.name} @${rate}/s`] ??= []).push(
        await run(t, { ms: roundMs, rate }, profiling ? `${rate}` : undefined),
      );
  }

  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  const f = (x: number) => x.toFixed(1);
  for (const [name, rs] of Object.entries(results)) {
    const sum = rs.map((x) => x.byNode[0] + x.byNode[1]);
    console.log(
      `${name.padEnd(18)} calls/s ${f(median(rs.map((x) => x.callsPerSecond))).padStart(7)}`,
      ` CPU µs/call ${f(median(sum))} (rounds ${sum.map(f).join(' ')})`,
      ` phone's node ${f(median(rs.map((x) => x.byNode[0])))}, other ${f(median(rs.map((x) => x.byNode[1])))}`,
      ` p50 ${(median(rs.map((x) => x.p50Ms)) * 1000).toFixed(0)} µs`,
      ` errors ${rs.reduce((s, x) => s + x.errors, 0)}`,
    );
  }
  if (!only)
    for (const [i, tree] of trees.entries()) {
      const tag = trees.length > 1 ? `#${i}` : '';
      const m = (key: string, pick: (x: Result) => number) => median(results[key].map(pick));
      const share = m(`cross${tag} closed`, (x) => x.callsPerSecond) / m(`same${tag} closed`, (x) => x.callsPerSecond);
      const addedP50 = m(`cross${tag} @${rate}/s`, (x) => x.p50Ms) - m(`same${tag} @${rate}/s`, (x) => x.p50Ms);
      console.log(
        `${tree}${tag}: closed-loop cross ÷ same-node calls/s ${share.toFixed(3)}, added p50 ${addedP50.toFixed(3)} ms`,
      );
    }
} finally {
  for (const c of cleanup.reverse()) await c().catch(() => {});
  for (const phone of phones) await phone.stop();
  await load.stop();
}
process.exit(0);
