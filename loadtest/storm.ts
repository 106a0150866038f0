// storm: N phones on one node; the node is killed (SIGKILL: no close frames) and started
// again (same store; the phones are re-pointed at it as a load balancer would), and every
// phone reconnects at once. Two rounds: lockstep (every
// phone retries every 200 ms, the worst case) and the reference agent's backoff after a drop
// (full jitter, first window 5 s, doubling to 30 s). Reported: time until all are back, the
// accept rate, and one core's P-256 signature verifications per second measured in the same run
// (every accept verifies one signature; the rest of an accept is challenge, key import, store
// lookup, ownership claim, initialize, tools/list and a store write). The target: accepts per
// relay CPU-second at least half of the accept floor's (below). Set PHONEBRIDGE_LOADTEST_RELAY_PROFILE_DIR
// to get a CPU profile of the relay per round (loadtest/fleet-relay.ts).
//
// Before the relay's rounds, the same phones storm the accept floor (loadtest/lib/accept-floor.ts:
// a bare uWS server doing only what the protocol makes an accept cost — nonce, key import,
// signature, upgrade, initialize and tools/list — no store, docs/decisions/0143-the-floor-verifies.md)
// in lockstep: its CPU per accept is the floor the relay's is read against, in the same run.
// With PHONEBRIDGE_LOADTEST_STRACE_DIR set, `strace -c -f` is attached to the floor and to the
// relay for their lockstep rounds (one summary file each); strace slows both several times,
// so the CPU figures of such a run are not comparable — use it for syscalls per accept only.
// Last, both the floor (before it is killed) and the relay (after its rounds) take every phone
// again once warm (the phones drop their sockets): the cold rounds' excess over these is
// start-up cost of a fresh process (JIT compilation), not per-accept work.
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { BACKOFF_DEFAULTS } from '../src/device/agent/backoff.ts';
import {
  generateDeviceKey,
  importDevicePublicKey,
  loadPrivateKey,
  signDevicePayload,
  verifyDeviceSignature,
} from '../src/crypto/device-auth.ts';
import { connectPhones } from './lib/phones.ts';
import { startAcceptFloor } from './lib/accept-floor.ts';
import { traceSyscalls } from './lib/strace.ts';
import { referenceSurface } from './lib/light-phone.ts';
import { startRelays } from './lib/relay.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import { lineChart } from './lib/svg.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * P-256 ECDSA verifications one core does per second (this thread, ~`ms` of work): per
 * wall-clock second, and per CPU-second this process used meanwhile — the one to set against
 * the relay's accepts per CPU-second when other processes share the cores.
 */
export function p256VerifyRate(ms = 1000): { perWallS: number; perCpuS: number } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const payload = Buffer.alloc(120, 7);
  const sig = sign('sha256', payload, { key: privateKey, dsaEncoding: 'der' });
  let n = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < ms && n < 1_000_000) {
    for (let i = 0; i < 50; i++) verify('sha256', payload, { key: publicKey, dsaEncoding: 'der' }, sig);
    n += 50;
  }
  const wallS = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { perWallS: n / wallS, perCpuS: n / Math.max(1e-6, (c.user + c.system) / 1e6) };
}

/**
 * What an accept of a phone the node has not seen must do at least: import the phone's key
 * as the relay does (importDevicePublicKey) and verify one signature. Distinct keys, per
 * CPU-second of this process.
 */
export async function p256ImportVerifyRate(ms = 1000): Promise<number> {
  const keys = Array.from({ length: 64 }, () => generateDeviceKey());
  const payload = Buffer.alloc(120, 7);
  const sigs = keys.map((k) => signDevicePayload(loadPrivateKey(k.privateKeyPem), payload));
  let n = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < ms && n < 1_000_000) {
    const batch = await Promise.all(keys.map((k) => importDevicePublicKey(k.publicKeySpkiBase64)));
    for (let i = 0; i < keys.length; i++)
      if (!verifyDeviceSignature(batch[i]!, payload, sigs[i])) throw new Error('import/verify probe failed');
    n += keys.length;
  }
  const c = process.cpuUsage(c0);
  return n / Math.max(1e-6, (c.user + c.system) / 1e6);
}

/**
 * `strace -c -f -p PID` until stopped; resolves its summary with calls per accept once
 * `stop(accepts)` is called. Undefined without PHONEBRIDGE_LOADTEST_STRACE_DIR.
 */
async function straceCounts(
  pid: number,
  label: string,
): Promise<((accepts: number) => Promise<Record<string, number> | undefined>) | undefined> {
  const dir = process.env.PHONEBRIDGE_LOADTEST_STRACE_DIR;
  if (!dir) return undefined;
  const trace = await traceSyscalls(pid, `${dir}/strace-${label}-${pid}.txt`);
  return async (accepts) => {
    const calls = await trace.stop();
    return calls && Object.fromEntries(Object.entries(calls).map(([k, n]) => [k, n / Math.max(1, accepts)]));
  };
}

type Policy = { name: string; delay(attempt: number): number };
const POLICIES: Policy[] = [
  { name: 'lockstep (200 ms retries)', delay: () => 200 },
  {
    name: 'agent backoff (full jitter from 5 s, cap 30 s)',
    delay: (n) =>
      Math.floor(Math.random() * Math.min(BACKOFF_DEFAULTS.capMs, BACKOFF_DEFAULTS.dropWindowMs * 2 ** (n - 1))),
  },
];

interface ProcessCpu {
  cpuMs: number;
  cpuSystemMs: number;
  mainThreadCpuMs?: number;
}

/** A process's CPU between two readings, and per accept of the `back` phones it took meanwhile. */
function acceptCpu(c0: ProcessCpu, c1: ProcessCpu, back: number) {
  const cpuS = (c1.cpuMs - c0.cpuMs) / 1000;
  return {
    cpuSeconds: cpuS,
    cpuSystemSeconds: (c1.cpuSystemMs - c0.cpuSystemMs) / 1000,
    mainThreadCpuSeconds:
      c0.mainThreadCpuMs !== undefined && c1.mainThreadCpuMs !== undefined
        ? (c1.mainThreadCpuMs - c0.mainThreadCpuMs) / 1000
        : undefined,
    cpuMsPerAccept: (cpuS * 1000) / Math.max(1, back),
    acceptsPerCpuSecond: back / Math.max(0.001, cpuS),
  };
}

async function run(ctx: ScenarioContext): Promise<void> {
  const m = ctx.metrics;
  const count = ctx.opts.phones ?? 5000;
  const surface = await referenceSurface();
  const relays = await startRelays();
  ctx.defer(() => relays.dispose());
  ctx.figures.store = relays.store.kind;
  let policy = POLICIES[0];
  let accepts: number[] = [];
  const fleet = await connectPhones({
    relay: relays.nodes[0],
    count,
    surface,
    concurrency: 200,
    reconnectDelayMs: (n) => policy.delay(n),
    onReconnected: (_p, at) => accepts.push(at),
  });
  ctx.defer(() => fleet.closeAll());
  ctx.setPhones(() => fleet.connected());
  ctx.beginLoad();
  // Measured before and after the rounds (averaged): the cores' share moves during a run.
  const verifyBefore = p256VerifyRate();
  const importBefore = await p256ImportVerifyRate();
  const missing = m.counter('phones_not_back');
  // Every target below is reported met or missed, and a miss fails the run (its threshold).
  const missed = m.counter('targets_missed');
  missed.add(0);
  const target = (t: Parameters<typeof ctx.target>[0]) => {
    ctx.target(t);
    if (!t.met) missed.add(1);
  };
  const curves: Array<{ name: string; points: Array<[number, number]> }> = [];
  const rounds: Record<string, unknown>[] = [];

  /**
   * The same process takes every phone again, its code compiled by now: the phones drop their
   * sockets (as a network blip would) and come back after 1 s, in lockstep; its CPU is counted
   * from 0.5 s after the drop (the closes handled) until all are back. Set against the rounds
   * on a fresh process, this is how much of an accept there is JIT compilation and warm-up.
   */
  const warmRound = async (cpu: () => Promise<ProcessCpu>) => {
    policy = { name: 'warm lockstep (1 s)', delay: () => 1000 };
    accepts = [];
    for (const ph of fleet.phones) ph.ws?.terminate();
    await sleep(500);
    const c0 = await cpu();
    const t0 = performance.now();
    while (accepts.length < count && performance.now() < t0 + 60_000) await sleep(50);
    const c1 = await cpu();
    const back = accepts.length;
    missing.add(count - back);
    return { back, ...acceptCpu(c0, c1, back) };
  };

  // Round 0: the accept floor, already listening, takes every phone of the killed relay
  // (lockstep). Its CPU from the kill until all are back, per accept.
  // Each phone's stored key, as the relay's store holds it (the phones share one key pair,
  // but each accept imports its phone's key afresh: loadtest/lib/accept-floor.ts).
  const floor = await startAcceptFloor(fleet.phones.map((ph) => [ph.deviceId, fleet.publicKeySpkiBase64]));
  ctx.defer(() => floor.kill());
  {
    policy = POLICIES[0];
    accepts = [];
    ctx.setNote('round 0: accept floor, lockstep');
    const trace = await straceCounts(floor.pid, 'floor');
    fleet.endpoint.url = floor.url;
    fleet.endpoint.host = new URL(floor.url).host;
    const c0 = await floor.cpu();
    await relays.nodes[0].kill();
    const t0 = performance.now();
    const bound = t0 + Math.max(60_000, ctx.durationS * 1000);
    while (accepts.length < count && performance.now() < bound) await sleep(50);
    const c1 = await floor.cpu();
    const back = accepts.length;
    missing.add(count - back);
    const syscalls = await trace?.(back);
    const sorted = accepts.sort((a, b) => a - b);
    const floorCpu = acceptCpu(c0, c1, back);
    const floorCounts = await floor.counts();
    // A floor that refused phones (a wrong host or key) would be measuring something else.
    if (floorCounts.rejected > 0) throw new Error(`accept floor refused ${floorCounts.rejected} upgrades`);
    ctx.figures.floor = {
      phones: count,
      back,
      secondsToAllBack: back ? (sorted[back - 1] - t0) / 1000 : NaN,
      ...floorCpu,
      counts: floorCounts,
      syscallsPerAccept: syscalls,
    };
    m.gauge('accepts_per_floor_cpu_s').set(floorCpu.acceptsPerCpuSecond);
    ctx.setNote('round 0b: accept floor, warm');
    ctx.figures.floorWarm = await warmRound(() => floor.cpu());
  }

  for (const [r, p] of POLICIES.entries()) {
    policy = p;
    accepts = [];
    ctx.setNote(`round ${r + 1}: ${p.name}`);
    await relays.nodes[0].kill();
    await floor.kill();
    const killedAt = performance.now();
    const node = await relays.restart(0);
    await node.profile('startup'); // the start-up is not the storm's
    // Attached before the phones are pointed here, so it sees every accept.
    const trace = r === 0 ? await straceCounts(node.child.pid!, 'relay-lockstep') : undefined;
    fleet.endpoint.url = node.url;
    fleet.endpoint.host = new URL(node.url).host;
    const readyAt = performance.now();
    const stats0 = await node.cpu();
    const cpu0 = stats0.cpuMs;
    const cpuSys0 = stats0.cpuSystemMs;
    const main0 = stats0.mainThreadCpuMs;
    const bound = readyAt + Math.max(60_000, ctx.durationS * 1000);
    while (accepts.length < count && performance.now() < bound) await sleep(50);
    const back = accepts.length;
    const syscalls = await trace?.(back);
    missing.add(count - back);
    const sorted = accepts.sort((a, b) => a - b);
    const lastS = back ? (sorted[back - 1] - readyAt) / 1000 : NaN;
    const perSecond = new Map<number, number>();
    for (const a of sorted) {
      const s = Math.floor((a - readyAt) / 1000);
      perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
    }
    const peak = Math.max(0, ...perSecond.values());
    const rate = back / Math.max(0.001, lastS);
    const key = r === 0 ? 'lockstep' : 'backoff';
    // The relay's own CPU time over the storm: accepts per CPU-second compare with one core's
    // verify rate even when other processes share the cores.
    const after = await node.cpu();
    await node.profile(`storm-${key}`); // from the restart until every phone was back (when profiling)
    const cpuS = (after.cpuMs - cpu0) / 1000;
    // What the relay burns with every phone back and nothing happening (timers, the journal
    // poll), for the accepts' cost net of it.
    await sleep(2000);
    const idleCpuPerS = ((await node.cpu()).cpuMs - after.cpuMs) / 2000;
    const { devices, deviceStore } = await node.stats();
    const netCpuS = Math.max(0.001, cpuS - idleCpuPerS * Math.max(0, lastS));
    const perCpuS = back / Math.max(0.001, cpuS);
    m.gauge(`accepts_per_relay_cpu_s_${key}`).set(perCpuS);
    m.gauge(`accepts_per_s_${key}`).set(rate);
    m.gauge(`seconds_to_all_back_${key}`).set(lastS);
    rounds.push({
      policy: p.name,
      phones: count,
      back,
      restartSeconds: (readyAt - killedAt) / 1000,
      secondsToAllBack: lastS,
      acceptsPerSecond: rate,
      peakAcceptsInOneSecond: peak,
      relayDevices: devices,
      relayStoreWork: deviceStore,
      relayCpuSeconds: cpuS,
      relayCpuSystemSeconds: (after.cpuSystemMs - cpuSys0) / 1000,
      relayMainThreadCpuSeconds:
        main0 !== undefined && after.mainThreadCpuMs !== undefined ? (after.mainThreadCpuMs - main0) / 1000 : undefined,
      acceptsPerRelayCpuSecond: perCpuS,
      relayIdleCpuPerSecond: idleCpuPerS,
      acceptsPerRelayCpuSecondNetOfIdle: back / netCpuS,
      relayCpuMsPerAccept: (cpuS * 1000) / Math.max(1, back),
      syscallsPerAccept: syscalls,
    });
    curves.push({
      name: p.name,
      points: [
        [0, 0] as [number, number],
        ...sorted.map((a, i) => [(a - readyAt) / 1000, i + 1] as [number, number]),
      ].filter((_, i, arr) => i % Math.max(1, Math.floor(arr.length / 400)) === 0 || i === arr.length - 1),
    });
  }
  ctx.figures.rounds = rounds;
  ctx.setNote('round 3: the same relay, warm');
  const warm = await warmRound(() => relays.nodes[0].cpu());
  await relays.nodes[0].profile('storm-warm'); // from the backoff round's end (idle) to here
  ctx.figures.relayWarm = warm;
  m.gauge('accepts_per_relay_cpu_s_warm').set(warm.acceptsPerCpuSecond);
  const verifyAfter = p256VerifyRate();
  const importAfter = await p256ImportVerifyRate();
  const verify = {
    perWallS: (verifyBefore.perWallS + verifyAfter.perWallS) / 2,
    perCpuS: (verifyBefore.perCpuS + verifyAfter.perCpuS) / 2,
  };
  const importVerify = (importBefore + importAfter) / 2;
  ctx.figures.p256_verify_per_s_one_core = verify.perWallS;
  ctx.figures.p256_verify_per_cpu_s = verify.perCpuS;
  ctx.figures.p256_verify_before_after = [verifyBefore, verifyAfter];
  ctx.figures.p256_import_and_verify_per_cpu_s = importVerify;
  m.gauge('p256_verify_per_s').set(verify.perWallS);
  m.gauge('p256_verify_per_cpu_s').set(verify.perCpuS);
  m.gauge('p256_import_and_verify_per_cpu_s').set(importVerify);
  const lockstep = rounds[0] as {
    acceptsPerRelayCpuSecond: number;
    acceptsPerSecond: number;
    peakAcceptsInOneSecond: number;
  };
  const perCpuS = lockstep.acceptsPerRelayCpuSecond;
  // Against one core's verifications: reported, no longer targets. The 70 % these were once
  // held to is out of reach by construction: the protocol forces an import and a verification
  // per accept on a restarted node, so even the floor stays under half the verification rate
  // (docs/decisions/0143-the-floor-verifies.md). The storm's target is the floor's, below.
  ctx.figures.accepts_per_relay_cpu_s_over_verify_per_cpu_s = perCpuS / verify.perCpuS;
  ctx.figures.accepts_per_relay_cpu_s_over_verify_per_wall_s = perCpuS / verify.perWallS;
  ctx.figures.lockstep_accept_rate_over_verify_per_wall_s =
    Math.max(lockstep.acceptsPerSecond, lockstep.peakAcceptsInOneSecond) / verify.perWallS;
  // The floor for phones with keys of their own: importing the key is part of every accept.
  ctx.figures.accepts_per_cpu_s_over_import_and_verify = perCpuS / importVerify;
  // What the protocol alone allows (the accept floor, no signature at all) against one core's
  // verifications, and the relay against that floor, CPU-second to CPU-second.
  const floorPerCpuS = (ctx.figures.floor as { acceptsPerCpuSecond: number }).acceptsPerCpuSecond;
  ctx.figures.floor_over_verify_per_cpu_s = floorPerCpuS / verify.perCpuS;
  ctx.figures.relay_over_floor_per_cpu_s = perCpuS / floorPerCpuS;
  m.gauge('floor_over_verify_per_cpu_s_percent').set((floorPerCpuS / verify.perCpuS) * 100);
  m.gauge('relay_over_floor_per_cpu_s_percent').set((perCpuS / floorPerCpuS) * 100);
  // The reconnect storm's target: half of what the accept floor does per CPU-second.
  target({
    name: 'accepts per relay CPU-second / the accept floor’s (lockstep, same run)',
    goal: '≥ 50 %',
    actual: (perCpuS / floorPerCpuS) * 100,
    unit: '%',
    met: perCpuS / floorPerCpuS >= 0.5,
  });
  // The time until every phone is back, against the phones' own backoff: a phone's first
  // attempt is drawn from [0, dropWindowMs), so that window is the least the last phone can take.
  const backoff = rounds[1] as { back: number; secondsToAllBack: number; restartSeconds: number } | undefined;
  if (backoff) {
    const windowS = BACKOFF_DEFAULTS.dropWindowMs / 1000;
    ctx.figures.backoff = {
      secondsToAllBack: backoff.secondsToAllBack,
      restartSeconds: backoff.restartSeconds,
      firstAttemptWindowSeconds: windowS,
      capSeconds: BACKOFF_DEFAULTS.capMs / 1000,
      allBackOverFirstWindow: backoff.secondsToAllBack / windowS,
    };
    const who =
      backoff.back === count ? `all ${count} phones` : `${backoff.back} of ${count} phones (the round's bound)`;
    ctx.note(
      `backoff round: ${who} back ${backoff.secondsToAllBack.toFixed(1)} s after the node listened again ` +
        `(${(backoff.secondsToAllBack / windowS).toFixed(2)}× the phones' first-attempt window of ${windowS} s; ` +
        `the node took ${backoff.restartSeconds.toFixed(1)} s to listen)`,
    );
  }
  ctx.chart(
    'reconnect-curve.svg',
    'Phones back after the node restarted',
    lineChart(
      {
        title: `storm: ${count} phones reconnecting after kill -9`,
        xLabel: 'seconds after restart',
        yLabel: 'phones back',
      },
      curves,
    ),
  );
}

export const scenario: Scenario = {
  name: 'storm',
  description:
    "N phones reconnect at once after their node is killed and restarted; lockstep retries, then the reference agent's jittered backoff; accepts per relay CPU-second against the accept floor's (target ≥ 50 %), time to all back against the phones' backoff.",
  defaultDurationS: 120,
  thresholds: ['phones_not_back:count==0', 'targets_missed:count==0'],
  run,
  refusesTarget: 'it kills and restarts the node it starts',
};
