// capacity: idle light phones on one node, as many as asked (or as the host's open-file limit
// allows), spread over 127.0.0.x source addresses so the ephemeral port range is no limit.
// Each phone serves the reference phone's real catalog. Reported: the relay's memory per
// idle phone (RSS and heap after GC, from the relay process itself), connect rate, and the
// memory of MCP sessions on the node.
import type { RelayStats } from './fleet-relay.ts';
import { openFileLimit, openFileLimits } from './lib/limits.ts';
import { clientAgent, McpSession } from './lib/mcp-client.ts';
import { connectPhones, pool } from './lib/phones.ts';
import { referenceSurface } from './lib/light-phone.ts';
import { SESSION_CHURN_FLAGS, startRelays } from './lib/relay.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import { lineChart } from './lib/svg.ts';

const KIB = 1024;
/** Descriptors the relay needs besides phone sockets (store, bus, listeners, clients). */
const FD_RESERVE = 400;

async function run(ctx: ScenarioContext): Promise<void> {
  const m = ctx.metrics;
  const wanted = ctx.opts.phones ?? 50_000;
  const fdLimit = openFileLimit();
  const count = fdLimit ? Math.min(wanted, fdLimit - FD_RESERVE) : wanted;
  ctx.figures.phones_wanted = wanted;
  ctx.figures.open_file_limit = fdLimit ?? 'unknown';
  const own = openFileLimits();
  ctx.figures.open_file_limit_hard = own?.hard ?? 'unknown';
  if (count < wanted)
    ctx.note(
      `${wanted} phones asked, ${count} tried: each process here may hold ${fdLimit} descriptors (RLIMIT_NOFILE soft; hard ${own?.hard ?? 'unknown'}), and the relay and this load generator each need one per phone`,
    );
  const surface = await referenceSurface();
  ctx.figures.catalog_bytes = surface.catalogBytes;
  ctx.figures.catalog_tools = surface.toolsResult.tools.length;

  // Its 1,000 sessions open from one address in seconds.
  const relays = await startRelays({ flags: SESSION_CHURN_FLAGS });
  ctx.defer(() => relays.dispose());
  const node = relays.nodes[0];
  ctx.figures.store = relays.store.kind;
  // Read from the relay process itself: what bounds it, whatever this process was given.
  const relayLimits = node.child.pid ? openFileLimits(node.child.pid) : undefined;
  ctx.figures.relay_open_file_limit = relayLimits ?? 'unknown';
  const base = await node.stats();
  ctx.figures.relay_baseline = base;

  ctx.beginLoad();
  const samples: Array<{ phones: number; stats: RelayStats }> = [];
  const failures = m.counter('connect_failures');
  const connected = m.gauge('phones_connected');
  let up = 0;
  ctx.setPhones(() => up);
  const t0 = performance.now();
  let nextSample = Math.max(1, Math.floor(count / 8));
  let sampling: Promise<void> | undefined;
  const fleet = await connectPhones({
    relay: node,
    count,
    surface,
    concurrency: 200,
    until: ctx.deadline,
    onProgress: (n) => {
      up = n;
      if (n >= nextSample && !sampling) {
        nextSample += Math.max(1, Math.floor(count / 8));
        sampling = node
          .stats()
          .then((s) => void samples.push({ phones: s.devices, stats: s }))
          .catch(() => {})
          .finally(() => (sampling = undefined));
      }
    },
  }).catch((err: Error) => {
    failures.add();
    throw err;
  });
  const connectS = (performance.now() - t0) / 1000;
  ctx.defer(() => fleet.closeAll());
  await sampling;
  const live = fleet.connected();
  connected.set(live);
  ctx.figures.connect_seconds = connectS;
  ctx.figures.connects_per_second = live / connectS;
  // Idle a moment so the relay's handshake work (store writes, claims) is all done.
  await new Promise((r) => setTimeout(r, 2000));
  const idle = await node.stats();
  samples.push({ phones: idle.devices, stats: idle });
  // RSS from the empty node can understate (pages the startup freed are reused first), so the
  // marginal cost (from the sample nearest half the phones to the end) is computed too.
  const half = samples.reduce(
    (b, s) => (Math.abs(s.phones - idle.devices / 2) < Math.abs(b.phones - idle.devices / 2) ? s : b),
    {
      phones: 0,
      stats: base,
    },
  );
  const span = Math.max(1, idle.devices - half.phones);
  // But RSS keeps the high-water mark of the connect burst, which can flatten the marginal
  // figure instead: the larger of the two is reported.
  const fromEmpty = {
    rss: (idle.rss - base.rss) / Math.max(1, idle.devices),
    heap: (idle.heapUsed - base.heapUsed) / Math.max(1, idle.devices),
  };
  const rssPer = Math.max((idle.rss - half.stats.rss) / span, fromEmpty.rss, 0);
  const heapPer = Math.max((idle.heapUsed - half.stats.heapUsed) / span, fromEmpty.heap);
  ctx.figures.relay_rss_per_phone_from_empty_kib = fromEmpty.rss / KIB;
  ctx.figures.relay_heap_per_phone_from_empty_kib = fromEmpty.heap / KIB;
  ctx.figures.marginal_from_phones = half.phones;
  const extPer = (idle.external - base.external) / Math.max(1, idle.devices);
  m.gauge('relay_rss_per_phone_kib').set(rssPer / KIB);
  m.gauge('relay_heap_per_phone_kib').set(heapPer / KIB);
  ctx.figures.relay_idle = idle;
  ctx.figures.relay_external_per_phone_kib = extPer / KIB;

  // Sessions per node: MCP sessions on a tenth of the phones (at most 1,000), their memory.
  const sessionCount = Math.min(1000, Math.max(1, Math.floor(live / 10)));
  const keys = await node.keys(fleet.phones.slice(0, sessionCount).map((p) => p.deviceId));
  const agent = clientAgent(32);
  ctx.defer(() => agent.destroy());
  const sessions: McpSession[] = [];
  await pool(keys.length, 16, async (i) => {
    sessions.push(await new McpSession(node.url, keys[i].token, agent).initialize());
  });
  const withSessions = await node.stats();
  ctx.figures.sessions = sessions.length;
  ctx.figures.relay_heap_per_session_kib = (withSessions.heapUsed - idle.heapUsed) / sessions.length / KIB;

  if (idle.devices < 50_000 && relayLimits && relayLimits.hard < 50_000 + FD_RESERVE)
    ctx.note(
      `idle phones reached ${idle.devices}: the relay process's open-file limit is ${relayLimits.soft} (hard ${relayLimits.hard}), below the 50,000 sockets the target needs; raise it (ulimit -n / LimitNOFILE) where the host allows`,
    );
  ctx.target({
    name: `idle phones on one node (relay's open-file limit ${relayLimits ? relayLimits.soft : 'unknown'})`,
    goal: '≥ 50,000',
    actual: idle.devices,
    unit: 'phones',
    met: idle.devices >= 50_000,
  });
  ctx.target({
    name: 'relay RSS per idle phone (after GC)',
    goal: '≤ 8 KiB',
    actual: rssPer / KIB,
    unit: 'KiB',
    met: rssPer <= 8 * KIB,
  });
  ctx.chart(
    'memory-per-phone.svg',
    'Relay memory per idle phone as phones connect',
    lineChart(
      {
        title: 'capacity: relay memory per idle phone (after GC)',
        xLabel: 'phones connected',
        yLabel: 'KiB per phone',
      },
      [
        { name: 'RSS', points: samples.map((s) => [s.phones, (s.stats.rss - base.rss) / Math.max(1, s.phones) / KIB]) },
        {
          name: 'heap',
          points: samples.map((s) => [s.phones, (s.stats.heapUsed - base.heapUsed) / Math.max(1, s.phones) / KIB]),
        },
      ],
    ),
  );
}

export const scenario: Scenario = {
  name: 'capacity',
  description:
    "Idle phones (each serving the reference phone's catalog) on one node, as many as the host allows; the relay's own memory per idle phone after GC, and per MCP session.",
  defaultDurationS: 600,
  thresholds: ['connect_failures:count==0', 'phones_connected:value>0'],
  run,
  refusesTarget: 'it reads the memory of the relay process it starts',
};
