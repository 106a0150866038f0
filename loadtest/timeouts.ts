// timeouts: a mix of calls the phone answers at once, answers late (after the relay's
// deadline: the client gets `timeout` within 1 s of it, the late answer is dropped),
// wait_for_events long polls with timeout_s from 5 to 600 (answered within timeout_s + 15 s),
// and calls the client cancels. Afterwards the relay's pending requests, timers, SSE streams
// and heap must be back at their baseline (read from the relay process itself).
// --time-scale F multiplies every limit (the relay's 30 s deadline and each timeout_s).
import { DEFAULT_TIMEOUT_MS, LONG_POLL_GRACE_MS } from '../src/protocol/timeouts.ts';
import type { RelayStats } from './fleet-relay.ts';
import { clientAgent, McpSession } from './lib/mcp-client.ts';
import { connectPhones } from './lib/phones.ts';
import { loadSurface, type CallContext } from './lib/light-phone.ts';
import { startRelays } from './lib/relay.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import { lineChart } from './lib/svg.ts';

const WAIT_TIMEOUTS_S = [5, 30, 60, 120, 300, 600];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Kind = 'now' | 'late' | 'wait' | 'cancel';
const MIX: Kind[] = ['now', 'now', 'late', 'now', 'wait', 'now', 'cancel', 'now'];

async function run(ctx: ScenarioContext): Promise<void> {
  const m = ctx.metrics;
  const scale = ctx.opts.timeScale;
  const deadlineMs = Math.max(100, Math.round(DEFAULT_TIMEOUT_MS * scale));
  const calls = m.counter('calls');
  const errors = m.counter('errors');
  const duration = m.trend('call_duration');
  const overshoot = m.trend('timeout_overshoot');
  const early = m.counter('timeout_early');
  const waitSlack = m.trend('wait_slack');
  const waitLate = m.counter('wait_over_limit');
  const cancelDelivered = m.rate('cancel_delivered');
  const lateSent = m.counter('late_answers_sent');
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  ctx.defer(() => timers.forEach(clearTimeout));
  const cancelledSeen = new Set<string>();
  const held = new Map<string, CallContext>();

  const onCall = (call: CallContext) => {
    const a = call.args;
    if (call.name === 'wait_for_events') {
      // A long poll with nothing to report answers empty at its own timeout.
      later(Number(a.timeout_s) * 1000, () => call.reply({ content: [{ type: 'text', text: '[]' }] }));
      return;
    }
    if (a.mode === 'late') {
      later(deadlineMs * 1.5, () => {
        if (call.reply({ content: [{ type: 'text', text: 'too late' }] })) lateSent.add();
      });
    } else if (a.mode === 'cancel') held.set(`${call.phone.deviceId}:${call.id}`, call);
    else call.reply({ content: [{ type: 'text', text: 'ok' }] });
  };
  const onCancelled = (phone: { deviceId: string }, requestId: unknown) => {
    const key = `${phone.deviceId}:${String(requestId)}`;
    if (held.delete(key)) cancelledSeen.add(key);
  };

  const relays = await startRelays({ flags: ['--request-timeout-ms', String(deadlineMs)] });
  ctx.defer(() => relays.dispose());
  const node = relays.nodes[0];
  ctx.figures.store = relays.store.kind;
  ctx.figures.request_deadline_ms = deadlineMs;
  const phoneCount = ctx.opts.phones ?? 10;
  const fleet = await connectPhones({ relay: node, count: phoneCount, surface: loadSurface(), onCall, onCancelled });
  ctx.defer(() => fleet.closeAll());
  ctx.setPhones(() => fleet.connected());
  const keys = await node.keys(fleet.phones.map((p) => p.deviceId));
  const agent = clientAgent(256);
  ctx.defer(() => agent.destroy());
  const sessions = await Promise.all(keys.map((k) => new McpSession(node.url, k.token, agent).initialize()));

  const settle = async () => {
    // Settled: nothing pending on the relay, then a moment for its own timers to be cleared.
    for (let i = 0; i < 100; i++) {
      if ((await node.stats()).pending === 0) break;
      await sleep(100);
    }
    await sleep(500);
  };
  await settle();
  const baseline = await node.stats();

  ctx.beginLoad();
  const waitTimeouts = WAIT_TIMEOUTS_S.map((s) => s * scale);
  const budgetMs = ctx.durationS * 1000;
  const longest = Math.max(deadlineMs * 1.5, Math.max(...waitTimeouts) * 1000);
  const stopIssuingAt = Math.min(ctx.deadline, performance.now() + Math.max(budgetMs - longest, budgetMs / 3));
  let n = 0;
  const one = async (kind: Kind, s: McpSession) => {
    calls.add();
    const t0 = performance.now();
    try {
      if (kind === 'now') {
        const r = await s.call('echo', { mode: 'now' });
        duration.add(performance.now() - t0);
        if (r.json?.error || !r.json?.result) throw new Error(`answer: ${JSON.stringify(r.json)}`);
      } else if (kind === 'late') {
        const r = await s.call('echo', { mode: 'late' });
        const took = performance.now() - t0;
        if (r.json?.error?.data?.code !== 'timeout') throw new Error(`late call got ${JSON.stringify(r.json)}`);
        if (took < deadlineMs - 5) early.add();
        overshoot.add(Math.max(0, took - deadlineMs));
      } else if (kind === 'wait') {
        const t = waitTimeouts[n % waitTimeouts.length];
        const r = await s.call('wait_for_events', { timeout_s: t });
        const took = performance.now() - t0;
        if (r.json?.error || !r.json?.result) throw new Error(`wait_for_events got ${JSON.stringify(r.json)}`);
        waitSlack.add(Math.max(0, took - t * 1000));
        if (took > Math.min(t * 1000 + LONG_POLL_GRACE_MS, 615_000)) waitLate.add();
      } else {
        const id = s.newId();
        const pending = s.call('echo', { mode: 'cancel' }, { id });
        await sleep(Math.min(200, deadlineMs / 4));
        await s.cancel(id);
        await pending; // the relay ends the request (a cancelled error) rather than leave it open
        cancelsIssued++;
      }
    } catch (err) {
      errors.add();
      ctx.log(`${kind} call failed: ${(err as Error).message}`);
    }
  };
  // The phone sees the relay's ids, not the client's: cancellations are matched by count.
  let cancelsIssued = 0;

  await Promise.all(
    sessions.map(async (s, w) => {
      // Every session runs the whole mix at least once, then until it is time to stop.
      for (let i = 0; (i < MIX.length || performance.now() < stopIssuingAt) && i < 100_000; i++) {
        const kind = MIX[(w + i) % MIX.length];
        n++;
        await one(kind, s);
      }
    }),
  );
  // Late answers arrive after the timeouts; wait for the last of them, then for the relay.
  const lastLate = performance.now() + deadlineMs;
  while (timers.size && performance.now() < lastLate + 2000) await sleep(50);
  await settle();
  for (let i = 0; i < cancelsIssued; i++) cancelDelivered.add(i < cancelledSeen.size);
  const after = await node.stats();
  const timerCount = (s: RelayStats) => s.handles.Timeout ?? 0;
  const leaks = {
    pending: after.pending - baseline.pending,
    sseStreams: after.sseStreams - baseline.sseStreams,
    timers: timerCount(after) - timerCount(baseline),
    heapBytes: after.heapUsed - baseline.heapUsed,
  };
  m.gauge('leaked_pending').set(leaks.pending);
  m.gauge('leaked_sse_streams').set(leaks.sseStreams);
  m.gauge('leaked_timers').set(leaks.timers);
  m.gauge('heap_growth_mib').set(leaks.heapBytes / 2 ** 20);
  ctx.figures.baseline = baseline;
  ctx.figures.after = after;
  ctx.figures.leaks = leaks;
  ctx.figures.held_uncancelled = held.size;
  const worst = overshoot.count ? overshoot.values().max : NaN;
  ctx.target({
    name: 'timed-out calls answered after their deadline (worst)',
    goal: '≤ 1000 ms',
    actual: worst,
    unit: 'ms',
    met: worst <= 1000,
  });
  ctx.target({
    name: 'leaks (pending + SSE streams + timers over baseline)',
    goal: '0',
    actual: leaks.pending + leaks.sseStreams + Math.max(0, leaks.timers),
    unit: '',
    met: leaks.pending === 0 && leaks.sseStreams === 0 && leaks.timers <= 0,
  });
  ctx.chart(
    'timeout-overshoot.svg',
    'Timed-out calls: answer time past the deadline',
    lineChart({ title: 'timeouts: overshoot past the deadline by percentile', xLabel: 'percentile', yLabel: 'ms' }, [
      { name: 'timeout overshoot', points: overshoot.curve() },
      { name: 'wait_for_events past timeout_s', points: waitSlack.curve() },
    ]),
  );
}

export const scenario: Scenario = {
  name: 'timeouts',
  description:
    "Calls answered at once, late (past the relay's deadline), long polls (wait_for_events, timeout_s 5–600) and client cancellations; afterwards the relay's pending state returns to its baseline.",
  defaultDurationS: 900,
  thresholds: [
    'errors:count==0',
    'timeout_early:count==0',
    'timeout_overshoot:max<1000',
    'wait_over_limit:count==0',
    'cancel_delivered:rate==1',
    'leaked_pending:value==0',
    'leaked_sse_streams:value==0',
  ],
  run,
  refusesTarget:
    "it sets the relay's deadline (--request-timeout-ms) and reads the pending requests and timers of the relay process it starts",
};
