// The phonebridge Grafana dashboard, as code (@grafana/grafana-foundation-sdk). `npm run dashboard`
// writes it to DASHBOARD_FILES; test/deploy/dashboard.test.ts fails when the committed JSON differs
// from what this file emits, and test/deploy/prometheus.test.ts runs every query against a real
// Prometheus scraping a real cluster. Only series the relay exports (src/metrics.ts) or Prometheus
// itself records (`up`, `scrape_duration_seconds`) are used. docs/OPERATIONS.md "Dashboard"
// describes the rows; docs/decisions/0100-dashboard-as-code-checked-by-real-prometheus.md says
// why it is built this way.
import {
  DashboardBuilder,
  DatasourceVariableBuilder,
  QueryVariableBuilder,
  RowBuilder,
  VariableRefresh,
  VariableSort,
} from '@grafana/grafana-foundation-sdk/dashboard';
import { DataqueryBuilder } from '@grafana/grafana-foundation-sdk/prometheus';
import { PanelBuilder as StatBuilder } from '@grafana/grafana-foundation-sdk/stat';
import { PanelBuilder as TimeseriesBuilder } from '@grafana/grafana-foundation-sdk/timeseries';

/** Where `npm run dashboard` writes the JSON: the plain file and the chart's copy (`.Files.Get`). */
export const DASHBOARD_FILES = ['deploy/grafana/phonebridge.json', 'helm/phonebridge/dashboards/phonebridge.json'];
export const DASHBOARD_COMMAND = 'npm run dashboard';
export const DASHBOARD_UID = 'phonebridge';

const DS = { type: 'prometheus', uid: '${datasource}' };
/** Every relay series on the dashboard is narrowed by the two variables. */
const SEL = 'job=~"$job", instance=~"$instance"';
const RATE = '$__rate_interval';

function q(expr: string, legend: string): DataqueryBuilder {
  return new DataqueryBuilder().datasource(DS).expr(expr).legendFormat(legend);
}

function stat(title: string, description: string, expr: string, unit = 'short'): StatBuilder {
  return new StatBuilder()
    .title(title)
    .description(description)
    .datasource(DS)
    .unit(unit)
    .span(6)
    .height(4)
    .withTarget(q(expr, title));
}

function graph(
  title: string,
  description: string,
  targets: Array<[expr: string, legend: string]>,
  unit = 'short',
  span = 12,
): TimeseriesBuilder {
  const p = new TimeseriesBuilder()
    .title(title)
    .description(description)
    .datasource(DS)
    .unit(unit)
    .span(span)
    .height(8);
  for (const [expr, legend] of targets) p.withTarget(q(expr, legend));
  return p.min(0);
}

const quantile = (phi: number, by: string, matchers = '') =>
  `histogram_quantile(${phi}, sum by (${by}) (rate(phonebridge_mcp_request_duration_seconds_bucket{${SEL}${matchers}}[${RATE}])))`;
/** A quantile of one of the relay's other latency histograms (src/metrics.ts LATENCY_BUCKETS). */
const quantileOf = (histogram: string, phi: number, by: string) =>
  `histogram_quantile(${phi}, sum by (${by}) (rate(${histogram}_bucket{${SEL}}[${RATE}])))`;
/** p50 and p99 of one of those histograms, over all nodes or per node. */
function medianAndP99(
  title: string,
  description: string,
  histogram: string,
  perNode: boolean,
  span: number,
): TimeseriesBuilder {
  const by = perNode ? 'le, instance' : 'le';
  const who = perNode ? '{{instance}} ' : '';
  return graph(
    title,
    description,
    [
      [quantileOf(histogram, 0.5, by), `${who}p50`],
      [quantileOf(histogram, 0.99, by), `${who}p99`],
    ],
    's',
    span,
  );
}
/** Per second, summed by `by`. */
const perSecond = (counter: string, by: string, matchers = '') =>
  `sum by (${by}) (rate(${counter}{${SEL}${matchers}}[${RATE}]))`;

export function buildDashboard() {
  const d = new DashboardBuilder('phonebridge relay')
    .uid(DASHBOARD_UID)
    .description('Gateway nodes of a phonebridge cluster: phones, MCP traffic, errors, pairing, node health.')
    .tags(['phonebridge', 'mcp'])
    .editable()
    .refresh('30s')
    .time({ from: 'now-3h', to: 'now' })
    .timezone('browser')
    .withVariable(new DatasourceVariableBuilder('datasource').label('Prometheus').type('prometheus'))
    .withVariable(
      new QueryVariableBuilder('job')
        .label('Job')
        .description('The scrape job of the relay admin endpoints (the chart: "<release>-phonebridge-admin").')
        .datasource(DS)
        .query('label_values(phonebridge_devices_connected, job)')
        .refresh(VariableRefresh.OnTimeRangeChanged)
        .sort(VariableSort.AlphabeticalAsc),
    )
    .withVariable(
      new QueryVariableBuilder('instance')
        .label('Node')
        .description('Scraped admin endpoints, one per gateway node.')
        .datasource(DS)
        .query('label_values(phonebridge_devices_connected{job=~"$job"}, instance)')
        .refresh(VariableRefresh.OnTimeRangeChanged)
        .sort(VariableSort.AlphabeticalAsc)
        .multi(true)
        .includeAll(true)
        .allValue('.+'),
    );

  d.withRow(new RowBuilder('Fleet overview'))
    .withPanel(stat('Phones online', 'Phone sockets held, all nodes.', `sum(phonebridge_devices_connected{${SEL}})`))
    .withPanel(stat('Nodes up', 'Admin endpoints Prometheus scraped successfully.', `sum(up{${SEL}} == 1)`))
    .withPanel(
      stat('SSE streams', 'Open SSE streams to MCP clients, all nodes.', `sum(phonebridge_sse_streams{${SEL}})`),
    )
    .withPanel(
      stat(
        'Sessions created /s',
        'New MCP sessions per second (initialize).',
        `sum(rate(phonebridge_sessions_created_total{${SEL}}[${RATE}]))`,
        'reqps',
      ),
    )
    .withPanel(
      graph(
        'tools/call per second by outcome',
        'ok = answered (a tool error from the phone is still ok); error = a relay error (device_offline, timeout, relay_unavailable, …); forbidden = scope; aborted = the client left.',
        [
          [
            `sum by (outcome) (rate(phonebridge_mcp_requests_total{${SEL}, method="tools/call"}[${RATE}]))`,
            '{{outcome}}',
          ],
        ],
        'reqps',
      ),
    )
    .withPanel(
      graph(
        'MCP requests per second by method',
        'Every JSON-RPC request from MCP clients.',
        [[`sum by (method) (rate(phonebridge_mcp_requests_total{${SEL}}[${RATE}]))`, '{{method}}']],
        'reqps',
      ),
    )
    .withPanel(
      graph(
        'tools/call latency',
        'Client request to answer, all nodes: includes the phone’s own work (and long polls such as wait_for_events).',
        [
          [quantile(0.5, 'le', ', method="tools/call"'), 'p50'],
          [quantile(0.95, 'le', ', method="tools/call"'), 'p95'],
          [quantile(0.99, 'le', ', method="tools/call"'), 'p99'],
        ],
        's',
      ),
    )
    .withPanel(
      graph(
        'p99 latency by method',
        'The alert PhonebridgeMcpLatencyP99High watches this (without tools/call).',
        [[quantile(0.99, 'le, method'), '{{method}}']],
        's',
      ),
    )
    .withPanel(
      stat(
        'Requests pending',
        'Client requests accepted by the nodes and not answered yet (held while a phone moves, or running on a phone).',
        `sum(phonebridge_pending_requests{${SEL}, role="origin"})`,
      ),
    )
    .withPanel(
      graph(
        'Requests answered by era and outcome',
        'session = revisions 2025-03-26 to 2025-11-25 (initialize, Mcp-Session-Id); stateless = 2026-07-28. Outcomes as above.',
        [[perSecond('phonebridge_mcp_requests_total', 'era, outcome'), '{{era}} {{outcome}}']],
        'reqps',
        9,
      ),
    )
    .withPanel(
      graph(
        'Traffic by side and direction',
        'Bytes per second: client = HTTP bodies on the client port (SSE included), phone = WebSocket frames; in = received by the relay.',
        [[perSecond('phonebridge_bytes_total', 'side, direction'), '{{side}} {{direction}}']],
        'Bps',
        9,
      ),
    );

  d.withRow(new RowBuilder('Per node'))
    .withPanel(
      graph(
        'Phones per node',
        'Phone sockets per node; a drained or killed node drops to zero as its phones reconnect elsewhere.',
        [[`sum by (instance) (phonebridge_devices_connected{${SEL}})`, '{{instance}}']],
        'short',
        8,
      ),
    )
    .withPanel(
      graph(
        'MCP requests per second per node',
        'Requests a node received from clients (the origin), whichever node holds the phone.',
        [[`sum by (instance) (rate(phonebridge_mcp_requests_total{${SEL}}[${RATE}]))`, '{{instance}}']],
        'reqps',
        8,
      ),
    )
    .withPanel(
      graph(
        'p99 latency per node',
        'All methods; a node far above the others is overloaded or far from Redis.',
        [[quantile(0.99, 'le, instance'), '{{instance}}']],
        's',
        8,
      ),
    )
    .withPanel(
      graph(
        'Phone frames per second per node',
        'WebSocket frames to and from the phones a node holds (requests forwarded to phones, answers, notifications).',
        [
          [
            `sum by (instance, direction) (rate(phonebridge_device_frames_total{${SEL}}[${RATE}]))`,
            '{{instance}} {{direction}}',
          ],
        ],
        'short',
      ),
    )
    .withPanel(
      graph('SSE streams per node', 'Open SSE streams (slow POST answers and GET streams) per node.', [
        [`sum by (instance) (phonebridge_sse_streams{${SEL}})`, '{{instance}}'],
      ]),
    )
    .withPanel(
      graph(
        'Pending requests per node',
        'origin = requests of the node’s own clients not answered yet; phone = requests in flight on the phone sockets it holds (from any node).',
        [[`sum by (instance, role) (phonebridge_pending_requests{${SEL}})`, '{{instance}} {{role}}']],
        'short',
        8,
      ),
    )
    .withPanel(
      graph(
        'Cross-node requests per node',
        'Requests over the bus: origin = sent to the node holding the phone, owner = run here for another node.',
        [[perSecond('phonebridge_cross_node_requests_total', 'instance, role'), '{{instance}} {{role}}']],
        'reqps',
        8,
      ),
    )
    .withPanel(
      graph(
        'Draining',
        '1 while a node drains (SIGTERM): it hands its phones over and stops taking connections.',
        [[`max by (instance) (phonebridge_draining{${SEL}})`, '{{instance}}']],
        'short',
        8,
      ),
    )
    .withPanel(
      medianAndP99(
        'Bus round trip per node',
        'Origin to the phone’s node and back (the phone’s own time included), p50 and p99, per origin node.',
        'phonebridge_bus_round_trip_seconds',
        true,
        8,
      ),
    )
    .withPanel(
      graph(
        'Bus publish latency per node',
        'One node-to-node message published on Redis until Redis answered, p99 (the alert PhonebridgeBusPublishSlow watches it).',
        [[quantileOf('phonebridge_bus_publish_duration_seconds', 0.99, 'le, instance'), '{{instance}} p99']],
        's',
        8,
      ),
    )
    .withPanel(
      graph(
        'Re-routes and goodbyes',
        'Requests routed again (moving = the owner drains, gone = a stale owner, node_left = its node said goodbye or went, unreachable = its node stopped listening), and goodbyes of nodes stopping on purpose.',
        [
          [perSecond('phonebridge_reroutes_total', 'reason'), 're-route {{reason}}'],
          [perSecond('phonebridge_goodbyes_total', 'direction'), 'goodbye {{direction}}'],
        ],
        'short',
        8,
      ),
    );

  d.withRow(new RowBuilder('Errors and refusals'))
    .withPanel(
      graph(
        'Relay error ratio',
        'Share of MCP requests answered with a relay error; the alert PhonebridgeMcpErrorRatioHigh fires above 5 % for 10 min.',
        [
          [
            `sum(rate(phonebridge_mcp_requests_total{${SEL}, outcome="error"}[${RATE}])) / sum(rate(phonebridge_mcp_requests_total{${SEL}}[${RATE}]))`,
            'error ratio',
          ],
        ],
        'percentunit',
        8,
      ),
    )
    .withPanel(
      graph(
        'Requests not ok by method and outcome',
        'error (relay errors), forbidden (scope), aborted (client disconnected before the answer).',
        [
          [
            `sum by (method, outcome) (rate(phonebridge_mcp_requests_total{${SEL}, outcome!="ok"}[${RATE}]))`,
            '{{method}} {{outcome}}',
          ],
        ],
        'reqps',
        8,
      ),
    )
    .withPanel(
      graph(
        'Phone socket closes by code',
        '1000 closed by the phone, 1001 idle (silent past --device-idle-ms: a half-open socket; alert PhonebridgeDeviceIdleCloses), 1006 dropped, 1009 frame too big, 1011 relay could not check it (store unreachable; alert PhonebridgeDeviceRelayErrors), 1012 drain hand-over, 4001 superseded, 4003 auth refused, 4004 removed or revoked.',
        [[`sum by (code) (rate(phonebridge_device_closes_total{${SEL}}[${RATE}]))`, '{{code}}']],
        'short',
        8,
      ),
    )
    .withPanel(
      graph(
        'Half-open phone sockets',
        'Phone sockets the relay closed at their silence limit (1001) and phones that came back on a new socket while the old one still looked alive (4001), per second by node. Until either, calls to such a phone end in timeout at their deadline (docs/OPERATIONS.md, Failure behaviour; alert PhonebridgeDeviceIdleCloses).',
        [
          [
            `sum by (instance) (rate(phonebridge_device_closes_total{${SEL}, code="1001"}[${RATE}]))`,
            'silent, closed {{instance}}',
          ],
          [
            `sum by (instance) (rate(phonebridge_device_closes_total{${SEL}, code="4001"}[${RATE}]))`,
            'superseded {{instance}}',
          ],
        ],
        'short',
        8,
      ),
    )
    .withPanel(
      graph(
        'HTTP responses by route and status',
        'Every response on the client port, by route pattern (unmatched = no route) and status.',
        [[perSecond('phonebridge_http_responses_total', 'route, status'), '{{route}} {{status}}']],
        'reqps',
        12,
      ),
    )
    .withPanel(
      graph(
        'Refused as too big',
        'client = a /mcp body (413) or its frame to the phone over 256 KiB; phone = a phone frame over 256 KiB (socket closed with 1009).',
        [[perSecond('phonebridge_frames_too_big_total', 'side'), '{{side}}']],
        'short',
        12,
      ),
    )
    .withPanel(
      graph(
        'Rate limits and budgets hit',
        'Refusals by limiter: pairing failures, challenges and initialize per key/address (429), the per-phone budgets (device_busy), hosted sign-in and OAuth registration.',
        [[perSecond('phonebridge_rate_limited_total', 'limiter'), '{{limiter}}']],
        'short',
        12,
      ),
    )
    .withPanel(
      graph(
        'SSE replays',
        'Streams resumed with Last-Event-ID: get = a GET stream, post = a dropped POST answer followed. Many mean clients or proxies cut streams.',
        [[perSecond('phonebridge_sse_replays_total', 'stream'), '{{stream}}']],
        'short',
        12,
      ),
    );

  d.withRow(new RowBuilder('Pairing and auth'))
    .withPanel(
      graph(
        'Pairing attempts by outcome',
        'paired, bad_code, limit_reached, rate_limited; the alert PhonebridgePairingFailures watches bad_code and rate_limited.',
        [[`sum by (outcome) (rate(phonebridge_pair_attempts_total{${SEL}}[${RATE}]))`, '{{outcome}}']],
        'reqps',
      ),
    )
    .withPanel(
      graph(
        'Phone authentications by outcome',
        'Signed challenges on /device/ws: ok, rejected, or error (the store did not answer); the alert PhonebridgeDeviceAuthRejections watches rejected.',
        [[`sum by (outcome) (rate(phonebridge_device_auth_total{${SEL}}[${RATE}]))`, '{{outcome}}']],
        'reqps',
      ),
    )
    .withPanel(
      graph(
        'MCP client auth failures by reason',
        'missing = no key, invalid = unknown, expired or revoked key (401), locked = account without a subscription (402), store_unavailable = the key could not be checked (503).',
        [[perSecond('phonebridge_client_auth_failures_total', 'reason'), '{{reason}}']],
        'reqps',
      ),
    )
    .withPanel(
      graph(
        'initialize answered from the cache',
        'initialize and server/discover answered by the relay: socket = the phone’s socket is on the answering node, store = the result cached in the store (the phone is on another node or offline), fallback = the phone never connected.',
        [[perSecond('phonebridge_initialize_cache_total', 'source'), '{{source}}']],
        'reqps',
      ),
    );

  d.withRow(new RowBuilder('Store, Redis and process health'))
    .withPanel(
      graph(
        'Store and Redis up',
        '1 = healthy per node: store = the last journal read succeeded (alert PhonebridgeStoreDown), redis = the bus is usable (alert PhonebridgeRedisDown).',
        [
          [`min by (instance) (phonebridge_store_up{${SEL}})`, 'store {{instance}}'],
          [`min by (instance) (phonebridge_redis_up{${SEL}})`, 'redis {{instance}}'],
        ],
        'short',
        8,
      ),
    )
    .withPanel(
      medianAndP99(
        'Store query latency',
        'Postgres queries as Kysely timed them, p50 and p99 over all nodes (the alert PhonebridgeStoreSlow watches p99).',
        'phonebridge_store_query_duration_seconds',
        false,
        8,
      ),
    )
    .withPanel(
      graph(
        'Store queries by kind and outcome',
        'Queries per second: select, insert, update, delete, other; error = the query failed on its connection (a store that cannot be reached at all shows in Store up).',
        [[perSecond('phonebridge_store_query_duration_seconds_count', 'kind, outcome'), '{{kind}} {{outcome}}']],
        'short',
        8,
      ),
    )
    .withPanel(
      medianAndP99(
        'Redis command latency per node',
        'Every bus command (scripts, publishes, replay reads) until Redis replied, p50 and p99.',
        'phonebridge_redis_command_duration_seconds',
        true,
        12,
      ),
    )
    .withPanel(
      graph(
        'Event loop lag p99',
        'Every node is one Node.js event loop; lag delays every call it routes (store and Redis replies included).',
        [[`max by (instance) (phonebridge_process_nodejs_eventloop_lag_p99_seconds{${SEL}})`, '{{instance}}']],
        's',
        8,
      ),
    )
    .withPanel(
      graph(
        'CPU per node',
        'Cores used by each node process.',
        [[`sum by (instance) (rate(phonebridge_process_process_cpu_seconds_total{${SEL}}[${RATE}]))`, '{{instance}}']],
        'short',
        8,
      ),
    )
    .withPanel(
      graph(
        'Resident memory per node',
        'RSS of each node process (the chart limits it to 1 GiB by default).',
        [[`max by (instance) (phonebridge_process_process_resident_memory_bytes{${SEL}})`, '{{instance}}']],
        'bytes',
        8,
      ),
    )
    .withPanel(
      graph(
        'Open file descriptors per node',
        'Phone sockets, client connections, the Postgres pool and the Redis connections all hold descriptors.',
        [[`max by (instance) (phonebridge_process_process_open_fds{${SEL}})`, '{{instance}}']],
        'short',
        8,
      ),
    )
    .withPanel(
      graph(
        'GC time per node',
        'Seconds per second spent in garbage collection.',
        [
          [
            `sum by (instance) (rate(phonebridge_process_nodejs_gc_duration_seconds_sum{${SEL}}[${RATE}]))`,
            '{{instance}}',
          ],
        ],
        'percentunit',
        8,
      ),
    )
    .withPanel(
      graph(
        'Scrape duration per node',
        'How long /metrics took to answer; a slow or failing scrape is the first sign of a stuck node.',
        [[`max by (instance) (scrape_duration_seconds{${SEL}})`, '{{instance}}']],
        's',
        8,
      ),
    );

  // Fleets (docs/decisions/0170-fleet-model.md): cluster-wide figures, no per-phone or per-label series.
  d.withRow(new RowBuilder('Fleets: allocations and enrollment'))
    .withPanel(
      stat(
        'Allocations active',
        'Unexpired allocations in the cluster (read from the store; every node reports the same figure).',
        `max(phonebridge_fleet_allocations_active{${SEL}})`,
      ),
    )
    .withPanel(
      stat(
        'Allocations waiting',
        'POST /api/v1/allocations requests waiting (wait_s) for a phone to become free, all nodes.',
        `sum(phonebridge_fleet_allocation_waiting{${SEL}})`,
      ),
    )
    .withPanel(
      stat(
        'Phones enrolled (active codes)',
        'Phones paired through enrollment codes that can still pair more.',
        `max(phonebridge_fleet_enrollment_phones{${SEL}, state="active"})`,
      ),
    )
    .withPanel(
      stat(
        'Phones enrolled (ended codes)',
        'Phones paired through enrollment codes that are used up, expired or revoked.',
        `max(phonebridge_fleet_enrollment_phones{${SEL}, state="ended"})`,
      ),
    )
    .withPanel(
      graph(
        'Allocation requests by outcome',
        'Per second: a phone handed out, or none free (409 no_device_available after any wait_s).',
        [[perSecond('phonebridge_fleet_allocation_requests_total', 'outcome'), '{{outcome}}']],
        'reqps',
        8,
      ),
    )
    .withPanel(
      medianAndP99(
        'Allocation wait',
        'From an allocation request to the phone handed out, wait_s included.',
        'phonebridge_fleet_allocation_wait_seconds',
        false,
        8,
      ),
    )
    .withPanel(
      graph(
        'Releases',
        'Allocations given back by their holder, per second.',
        [[perSecond('phonebridge_fleet_allocation_releases_total', ''), 'released']],
        'reqps',
        8,
      ),
    );

  const dashboard = d.build();
  // Grafana needs a unique id per panel (rows included); the builder leaves them unset.
  dashboard.panels?.forEach((panel, i) => (panel.id = i + 1));
  return dashboard;
}

/** The JSON as committed: stable key order (the builder's), two-space indent, final newline. */
export function renderDashboardJson(): string {
  return `${JSON.stringify(buildDashboard(), null, 2)}\n`;
}
