// Prometheus metrics. Labels are bounded: MCP method names outside the known set are "other";
// no label ever carries a device, account, session or token id. The catalogue with every
// family is in docs/OPERATIONS.md ("Health and metrics"). Series the per-call path touches are
// cells bound once (src/metric-cells.ts, docs/decisions/0120-metric-cells.md).
import process from 'node:process';
import { Buffer } from 'node:buffer';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import client from 'prom-client';
import type { LogEvent } from 'kysely';
import { CellCounter, CellHistogram, ReadGauge, type Count, type Timing } from './metric-cells.ts';

export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'phonebridge_process_' });

// prom-client's defaults also name three gauges `…_total`, the suffix Prometheus keeps for
// counters (`promtool check metrics` flags them, and a rate() of one would look right and mean
// nothing). Their readings are exported as `…_all` instead, read at scrape as prom-client read
// them (docs/decisions/0228-process-totals-are-not-counters.md).
const PROCESS_TOTALS: Array<[kind: string, read: (() => number) | undefined, what: string]> = [
  ['handles', activeCount('_getActiveHandles'), 'libuv handles'],
  ['requests', activeCount('_getActiveRequests'), 'libuv requests'],
  ['resources', () => process.getActiveResourcesInfo().length, 'resources keeping the event loop alive'],
];
for (const [kind, read, what] of PROCESS_TOTALS) {
  const family = `phonebridge_process_nodejs_active_${kind}`;
  registry.removeSingleMetric(`${family}_total`);
  if (read)
    new ReadGauge(
      { name: `${family}_all`, help: `Active ${what}, all types (the sum of ${family})`, registers: [registry] },
      () => [[{}, read()]],
    );
}

/** A count of Node's internal process._getActive* lists (prom-client reads the same), if this Node has it. */
function activeCount(fn: '_getActiveHandles' | '_getActiveRequests'): (() => number) | undefined {
  const get = (process as unknown as Record<string, (() => unknown[]) | undefined>)[fn];
  return typeof get === 'function' ? () => get.call(process).length : undefined;
}

const KNOWN_METHODS = new Set([
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/read',
  'resources/templates/list',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'server/discover',
  'notifications/cancelled',
  'notifications/initialized',
  'notifications/progress',
  'notifications/roots/list_changed',
]);

export function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : 'other';
}

/**
 * Every latency histogram: from 0.1 ms (a same-node answer, a Redis command) to 615 s, the
 * longest a forwarded request may take (wait_for_events: its wait + 15 s).
 */
export const LATENCY_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
  615,
] as const;

/** How the relay names the two MCP eras it serves (src/protocol/stateless.ts classifyEra). */
export type EraLabel = 'session' | 'stateless';

export const metrics = {
  mcpRequests: new CellCounter({
    name: 'phonebridge_mcp_requests_total',
    help: 'JSON-RPC requests from MCP clients answered, by method, outcome and era (session = 2025-03-26 to 2025-11-25, stateless = 2026-07-28)',
    labelNames: ['method', 'outcome', 'era'],
    registers: [registry],
  }),
  mcpLatency: new CellHistogram({
    name: 'phonebridge_mcp_request_duration_seconds',
    help: 'Time from a client request to its answer, by method',
    labelNames: ['method'],
    // Trace ids as exemplars while tracing is on (src/observability/openmetrics.ts serves them).
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  }),
  httpResponses: new CellCounter({
    name: 'phonebridge_http_responses_total',
    help: 'HTTP responses on the client port, by route pattern and status',
    labelNames: ['route', 'status'],
    registers: [registry],
  }),
  devicesConnected: new client.Gauge({
    name: 'phonebridge_devices_connected',
    help: 'Phone sockets held by this node',
    registers: [registry],
  }),
  deviceFrames: new CellCounter({
    name: 'phonebridge_device_frames_total',
    help: 'WebSocket frames exchanged with phones',
    labelNames: ['direction'],
    registers: [registry],
  }),
  deviceAuth: new client.Counter({
    name: 'phonebridge_device_auth_total',
    help: 'Phone socket authentication attempts by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  deviceCloses: new client.Counter({
    name: 'phonebridge_device_closes_total',
    help: 'Phone sockets closed, by close code',
    labelNames: ['code'] as const,
    registers: [registry],
  }),
  pairAttempts: new client.Counter({
    name: 'phonebridge_pair_attempts_total',
    help: 'Pairing attempts by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  sseStreams: new client.Gauge({
    name: 'phonebridge_sse_streams',
    help: 'Open SSE streams to MCP clients on this node',
    registers: [registry],
  }),
  sessionsCreated: new client.Counter({
    name: 'phonebridge_sessions_created_total',
    help: 'MCP sessions created',
    registers: [registry],
  }),
};

// --- the per-call path: cells bound once ------------------------------------------------------

const requestCells = new Map<string, Map<string, [session: Count, stateless: Count]>>();
const latencyCells = new Map<string, Timing>();

/** One answered MCP request: its count by method, outcome and era, and its latency by method. */
export function observeMcpRequest(
  method: string,
  outcome: string,
  seconds: number,
  era: EraLabel = 'session',
  traceId?: string,
): void {
  const label = methodLabel(method);
  let byOutcome = requestCells.get(label);
  if (!byOutcome) requestCells.set(label, (byOutcome = new Map<string, [Count, Count]>()));
  let cells = byOutcome.get(outcome);
  if (!cells) {
    const cell = (e: EraLabel) => metrics.mcpRequests.cell({ method: label, outcome, era: e });
    byOutcome.set(outcome, (cells = [cell('session'), cell('stateless')]));
  }
  cells[era === 'session' ? 0 : 1].inc();
  let h = latencyCells.get(label);
  if (!h) latencyCells.set(label, (h = metrics.mcpLatency.cell({ method: label })));
  if (traceId === undefined) h.observe(seconds);
  else h.observeWithExemplar(seconds, { trace_id: traceId });
}

export const framesToDevice = metrics.deviceFrames.cell({ direction: 'to_device' });
export const framesFromDevice = metrics.deviceFrames.cell({ direction: 'from_device' });

const counter = (name: string, help: string, labelNames: string[]) =>
  new CellCounter({ name, help, labelNames, registers: [registry] });
const histogram = (name: string, help: string, labelNames: string[] = []) =>
  new CellHistogram({ name, help, labelNames, buckets: LATENCY_BUCKETS, registers: [registry] });
/** One cell per label value, bound now. */
function cellsBy<K extends string>(metric: CellCounter, label: string, values: readonly K[]): Record<K, Count> {
  return Object.fromEntries(values.map((v) => [v, metric.cell({ [label]: v })])) as Record<K, Count>;
}

const bytes = counter(
  'phonebridge_bytes_total',
  'Bytes received (in) and sent (out): side client = HTTP bodies on the client port (SSE included), side phone = WebSocket frames of phone sockets',
  ['side', 'direction'],
);
const clientBytesIn = bytes.cell({ side: 'client', direction: 'in' });
const clientBytesOut = bytes.cell({ side: 'client', direction: 'out' });
const phoneBytesIn = bytes.cell({ side: 'phone', direction: 'in' });
const phoneBytesOut = bytes.cell({ side: 'phone', direction: 'out' });

/** A frame queued for a phone: counted, with its bytes. */
export function sentToPhone(bytes: number): void {
  framesToDevice.inc();
  phoneBytesOut.inc(bytes);
}

/** A frame read from a phone socket (before any check). */
export function receivedFromPhone(byteLength: number): void {
  phoneBytesIn.inc(byteLength);
}

/** Messages refused for their size: a client body or request frame over 256 KiB, a phone frame over 256 KiB (1009). */
export const framesTooBig = cellsBy(
  counter('phonebridge_frames_too_big_total', 'Messages refused as too big (over 256 KiB), by side', ['side']),
  'side',
  ['client', 'phone'] as const,
);

/** /mcp requests refused before any session: no key, an unknown or expired key, a locked account, the store away. */
export const clientAuthFailures = cellsBy(
  counter('phonebridge_client_auth_failures_total', 'MCP client authentication failures, by reason', ['reason']),
  'reason',
  ['missing', 'invalid', 'locked', 'store_unavailable'] as const,
);

/** Requests refused by a limit (429s, and device_busy refusals of the per-phone budgets). */
export const rateLimited = cellsBy(
  counter('phonebridge_rate_limited_total', 'Requests refused by a rate limit or budget, by limiter', ['limiter']),
  'limiter',
  [
    'pair_failures',
    'challenges',
    'initialize_per_key',
    'initialize_per_address',
    'phone_in_flight',
    'key_in_flight',
    'key_waits',
    'oauth_registrations',
    'signin_links',
  ] as const,
);

/** Entries the in-process bus forgot before their time, to stay within its bounds (src/bus/local/index.ts). */
export const localBusDropped = cellsBy(
  counter(
    'phonebridge_local_bus_dropped_total',
    'Challenge nonces and rate-limit windows the in-process bus forgot early to stay within its bounds, by kind',
    ['kind'],
  ),
  'kind',
  ['nonce', 'window'] as const,
);

/** Client requests this node sent to the phone's node (origin), and requests it ran for another node (owner). */
export const crossNode = cellsBy(
  counter(
    'phonebridge_cross_node_requests_total',
    'Requests crossing nodes over the bus: sent to the owner node (origin), run for an origin node (owner)',
    ['role'],
  ),
  'role',
  ['origin', 'owner'] as const,
);

/** Requests routed again (src/gateway/router.ts): the owner's redo (moving, gone), its node left, or it stopped listening. */
export const reroutes = cellsBy(
  counter('phonebridge_reroutes_total', 'Requests routed again to find the phone, by reason', ['reason']),
  'reason',
  ['moving', 'gone', 'node_left', 'unreachable'] as const,
);

/** Goodbyes (a node stopping on purpose): this node's own, and those it heard. */
export const goodbyes = cellsBy(
  counter('phonebridge_goodbyes_total', 'Goodbyes of nodes stopping on purpose: said by this node, heard from others', [
    'direction',
  ]),
  'direction',
  ['sent', 'received'] as const,
);

/**
 * Bus messages and Redis records this node could not read: malformed, or of a format version
 * older than it reads (docs/decisions/0200-bus-and-record-format-versions.md). Non-zero during
 * a rolling upgrade means two releases too far apart share the cluster.
 */
export const unreadable = cellsBy(
  counter('phonebridge_bus_unreadable_total', 'Bus messages and Redis records this node could not read, by format', [
    'format',
  ]),
  'format',
  ['nodeMessage', 'supersede', 'control', 'deviceFrame', 'session', 'owner', 'replayEntry', 'liveness'] as const,
);

/** initialize and server/discover answered from the phone's initialize result: from its socket, the store, or neither. */
export const initializeFrom = cellsBy(
  counter(
    'phonebridge_initialize_cache_total',
    "initialize and server/discover answered by the relay from the phone's cached initialize result, by source (socket, store, fallback = the phone never connected)",
    ['source'],
  ),
  'source',
  ['socket', 'store', 'fallback'] as const,
);

/** GETs with Last-Event-ID: a GET stream resumed, or a dropped POST answer stream followed. */
export const sseReplays = cellsBy(
  counter('phonebridge_sse_replays_total', 'SSE streams resumed with Last-Event-ID, by the stream resumed', ['stream']),
  'stream',
  ['get', 'post'] as const,
);

/** Origin side: a remote request sent (performance.now()) until its answer or failure came back. */
export const busRoundTrip: Timing = histogram(
  'phonebridge_bus_round_trip_seconds',
  "Origin node to the phone's node and back: from publishing a request until its answer arrives (the phone's own time included)",
).cell();

/**
 * A node-to-node publish on Redis, until Redis acknowledged it. Messages sent without their
 * replies (src/bus/redis/quiet.ts) count once each, with the time Redis took to confirm their
 * batch: the same question (how long Redis takes to answer this node) without a reply apiece.
 */
export const busPublish: Timing = histogram(
  'phonebridge_bus_publish_duration_seconds',
  "Publishing one node-to-node message on the bus (Redis PUBLISH) until Redis answered it, or confirmed the batch it went in (messages sent without Redis' reply)",
).cell();

/** Every Redis command of the bus (scripts included). */
export const redisCommand: Timing = histogram(
  'phonebridge_redis_command_duration_seconds',
  'Redis commands of the cluster bus, until the reply (or the failure)',
).cell();

/** The answer of a remote request: its round trip is observed; `p` passes through. */
export function answered<T extends { route: { sentPerf: number } }>(p: T | undefined): T | undefined {
  if (p) busRoundTrip.since(p.route.sentPerf);
  return p;
}

// --- HTTP responses and client bytes, per route -------------------------------------------------

/** One client-port route: its responses by status, and the body bytes in and out. */
export class RouteMetrics {
  private readonly byStatus = new Map<number, Count>();
  constructor(readonly route: string) {
    // Present from the start (at zero) for every route the node serves.
    if (route !== 'unmatched') this.byStatus.set(200, metrics.httpResponses.cell({ route, status: '200' }));
  }

  /** A response written: its status, and its body's bytes. */
  responded(status: number, body?: string | Buffer): void {
    let c = this.byStatus.get(status);
    if (!c) this.byStatus.set(status, (c = metrics.httpResponses.cell({ route: this.route, status: String(status) })));
    c.inc();
    this.bytesOut(body);
  }

  bytesIn(n: number): void {
    clientBytesIn.inc(n);
  }

  bytesOut(body: string | Buffer | undefined): void {
    if (body) clientBytesOut.inc(typeof body === 'string' ? Buffer.byteLength(body) : body.length);
  }
}

const routes = new Map<string, RouteMetrics>();

/** The metrics of a route pattern; `/*` (nothing matched) is "unmatched". */
export function routeMetrics(pattern: string): RouteMetrics {
  const route = pattern === '/*' ? 'unmatched' : pattern;
  let r = routes.get(route);
  if (!r) routes.set(route, (r = new RouteMetrics(route)));
  return r;
}

// --- store ----------------------------------------------------------------------------------------

const storeQueries = new CellHistogram({
  name: 'phonebridge_store_query_duration_seconds',
  help: 'Store (Postgres) queries, by statement kind and outcome',
  labelNames: ['kind', 'outcome'],
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
const QUERY_KINDS: Record<string, string> = {
  SelectQueryNode: 'select',
  InsertQueryNode: 'insert',
  UpdateQueryNode: 'update',
  DeleteQueryNode: 'delete',
};
const storeCells = new Map<string, Timing>();

/** Kysely's `log` hook (src/store/kysely-store.ts): every query's duration, as Kysely measured it. */
export function observeStoreQuery(event: LogEvent): void {
  observeStoreStatement(
    QUERY_KINDS[event.query.query.kind] ?? 'other',
    event.level !== 'error',
    event.queryDurationMillis,
  );
}

/** A statement the store runs outside Kysely (a prepared one: src/store/kysely-store.ts), counted the same way. */
export function observeStoreStatement(kind: string, ok: boolean, durationMs: number): void {
  const key = ok ? kind : `${kind} error`;
  let cell = storeCells.get(key);
  if (!cell) storeCells.set(key, (cell = storeQueries.cell({ kind, outcome: ok ? 'ok' : 'error' })));
  cell.observe(durationMs / 1000);
}

// --- per node, read at scrape time ----------------------------------------------------------------

/** What a gateway node reports about itself (src/gateway/node.ts). */
export interface NodeGauges {
  /** Client requests this node accepted and has not answered (its router's). */
  pending(): number;
  /** Requests in flight on the phone sockets this node holds (whoever sent them). */
  onPhones(): number;
  draining(): boolean;
  /** The last read of the store (the invalidation journal poll) succeeded; undefined before the first. */
  storeUp(): boolean | undefined;
  /** Redis answers; undefined on a node without Redis (the in-process bus). */
  redisUp(): boolean | undefined;
}

// More than one node shares a process only in tests: they are summed (pending), or the worst wins.
const nodes = new Set<NodeGauges>();

/** Reports a node's gauges until the returned function is called (node close). */
export function trackNode(n: NodeGauges): () => void {
  nodes.add(n);
  if (nodes.size === 1) eventLoopStalls.start();
  return () => {
    if (nodes.delete(n) && nodes.size === 0) eventLoopStalls.stop();
  };
}

// --- event loop -----------------------------------------------------------------------------------

/** Stalls are read as the worst delay of each window of this length. */
export const EVENT_LOOP_WINDOW_MS = 1_000;
const EVENT_LOOP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;

/**
 * phonebridge_event_loop_delay_seconds: one observation per second of the worst event-loop
 * delay in it (perf_hooks.monitorEventLoopDelay, 10 ms resolution). A stall holds every socket
 * of the node: answers wait, and a request that arrives during it is read only after uWS's idle
 * sweep has run (docs/OPERATIONS.md "Keep-alive"). Unlike the sampled p99 of the default
 * process metrics, nothing is lost between scrapes and several scrapers read the same series.
 */
class EventLoopStalls {
  private readonly histogram = new CellHistogram({
    name: 'phonebridge_event_loop_delay_seconds',
    help: 'Worst event-loop delay of each one-second window on this node (a stall delays every socket it holds)',
    buckets: EVENT_LOOP_BUCKETS,
    registers: [registry],
  });
  private readonly cell = this.histogram.cell();
  private monitor?: IntervalHistogram;
  private timer?: NodeJS.Timeout;

  start(): void {
    if (this.monitor) return;
    this.monitor = monitorEventLoopDelay({ resolution: 10 });
    this.monitor.enable();
    this.timer = setInterval(() => this.sample(), EVENT_LOOP_WINDOW_MS).unref();
  }

  /** Records the window that just ended (the interval's own lateness is part of its max). */
  sample(): void {
    const m = this.monitor;
    if (!m) return;
    // max is in ns and includes the 10 ms sampling period itself: subtract it, as prom-client does.
    if (m.count > 0) this.cell.observe(Math.max(0, m.max / 1e9 - 0.01));
    m.reset();
  }

  stop(): void {
    this.sample();
    this.monitor?.disable();
    clearInterval(this.timer);
    this.monitor = this.timer = undefined;
  }
}
const eventLoopStalls = new EventLoopStalls();

const all = (read: (n: NodeGauges) => boolean | undefined, worst: boolean): Array<[Record<string, string>, number]> => {
  const seen = [...nodes].map(read).filter((v): v is boolean => v !== undefined);
  if (seen.length === 0) return [];
  return [[{}, seen.includes(worst) ? Number(worst) : Number(!worst)]];
};

new ReadGauge(
  {
    name: 'phonebridge_pending_requests',
    help: 'Requests in flight on this node: origin = its clients’ requests not yet answered, phone = requests on the phone sockets it holds',
    labelNames: ['role'],
    registers: [registry],
  },
  () => {
    let pending = 0;
    let onPhones = 0;
    for (const n of nodes) {
      pending += n.pending();
      onPhones += n.onPhones();
    }
    return nodes.size === 0
      ? []
      : [
          [{ role: 'origin' }, pending],
          [{ role: 'phone' }, onPhones],
        ];
  },
);
new ReadGauge(
  { name: 'phonebridge_draining', help: '1 while this node drains (SIGTERM), else 0', registers: [registry] },
  () => all((n) => n.draining(), true),
);
new ReadGauge(
  {
    name: 'phonebridge_store_up',
    help: "1 when this node's last read of the store (the invalidation journal, every --control-poll-ms; on the embedded store after a change, at least every 10 polls) succeeded, else 0",
    registers: [registry],
  },
  () => all((n) => n.storeUp(), false),
);
new ReadGauge(
  {
    name: 'phonebridge_redis_up',
    help: 'Whether the cluster bus (Redis) is usable from this node: 1, or 0 while it is unreachable; absent without Redis',
    registers: [registry],
  },
  () => all((n) => n.redisUp(), false),
);

let answerBuffersHeld = (): number => 0;
/** The process's answer buffers (src/gateway/answer-buffers.ts) tell the gauge below how to read them. */
export function readAnswerBuffersWith(read: () => number): void {
  answerBuffersHeld = read;
}
new ReadGauge(
  {
    name: 'phonebridge_answer_buffers_bytes',
    help: 'Bytes of answer buffers this process keeps for reuse (at most 8 MiB)',
    registers: [registry],
  },
  () => [[{}, answerBuffersHeld()]],
);

// The label values known in advance are exported at zero from the start, so that every family
// exists on a node's first scrape (dashboards show 0, not "No data"; rate() has a start). The
// cell families bind theirs above (cellsBy); the MCP families bind the method clients call most.
for (const outcome of ['ok', 'error', 'forbidden', 'aborted'])
  for (const era of ['session', 'stateless']) metrics.mcpRequests.cell({ method: 'tools/call', outcome, era });
latencyCells.set('tools/call', metrics.mcpLatency.cell({ method: 'tools/call' }));
for (const outcome of ['ok', 'rejected', 'error']) metrics.deviceAuth.inc({ outcome }, 0);
for (const outcome of ['paired', 'repeated', 'bad_code', 'limit_reached', 'rate_limited'])
  metrics.pairAttempts.inc({ outcome }, 0);
// The protocol's close codes (docs/PROTOCOL.md), the two every phone meets (a clean close, a
// dropped socket) and 1005 (a close frame without a code). A phone chooses the code it closes
// with: the others are "other", so that no phone can add series of its own.
const CLOSE_CODES = [1000, 1001, 1003, 1005, 1006, 1009, 1011, 1012, 4001, 4003, 4004];
for (const code of [...CLOSE_CODES.map(String), 'other']) metrics.deviceCloses.inc({ code }, 0);

// Per phone accept and close: label children looked up once (a labelled inc hashes its labels every time).
export const deviceAuthOk = metrics.deviceAuth.labels({ outcome: 'ok' });
export const deviceAuthRejected = metrics.deviceAuth.labels({ outcome: 'rejected' });
/** A phone the relay could not check (the store unreachable: closed with 1011, retry): neither accepted nor refused. */
export const deviceAuthError = metrics.deviceAuth.labels({ outcome: 'error' });
const closeChildren = new Map<number, { inc(): void }>(
  CLOSE_CODES.map((code) => [code, metrics.deviceCloses.labels({ code: String(code) })]),
);
const otherCloses = metrics.deviceCloses.labels({ code: 'other' });

/** One phone socket closed with this code (the phone's, or the relay's own). */
export function countDeviceClose(code: number): void {
  (closeChildren.get(code) ?? otherCloses).inc();
}
