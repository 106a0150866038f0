// Prometheus metrics. Labels are bounded: MCP method names outside the known set are "other".
import client from 'prom-client';

export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'phonebridge_process_' });

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

export const metrics = {
  mcpRequests: new client.Counter({
    name: 'phonebridge_mcp_requests_total',
    help: 'JSON-RPC requests from MCP clients, by method and outcome',
    labelNames: ['method', 'outcome'] as const,
    registers: [registry],
  }),
  mcpLatency: new client.Histogram({
    name: 'phonebridge_mcp_request_duration_seconds',
    help: 'Time from a client request to its answer, by method',
    labelNames: ['method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 600],
    registers: [registry],
  }),
  httpResponses: new client.Counter({
    name: 'phonebridge_http_responses_total',
    help: 'HTTP responses by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [registry],
  }),
  devicesConnected: new client.Gauge({
    name: 'phonebridge_devices_connected',
    help: 'Phone sockets held by this node',
    registers: [registry],
  }),
  deviceFrames: new client.Counter({
    name: 'phonebridge_device_frames_total',
    help: 'WebSocket frames exchanged with phones',
    labelNames: ['direction'] as const,
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

// Pre-bound label children for the per-call path: a label lookup hashes its label set each time.
const requestChildren = new Map<string, { inc(): void }>();
const latencyChildren = new Map<string, { observe(v: number): void }>();

/** One answered MCP request: its count by method and outcome, and its latency by method. */
export function observeMcpRequest(method: string, outcome: string, seconds: number): void {
  const label = methodLabel(method);
  const key = `${label}\u0000${outcome}`;
  let c = requestChildren.get(key);
  if (!c) requestChildren.set(key, (c = metrics.mcpRequests.labels({ method: label, outcome })));
  c.inc();
  let h = latencyChildren.get(label);
  if (!h) latencyChildren.set(label, (h = metrics.mcpLatency.labels({ method: label })));
  h.observe(seconds);
}

export const framesToDevice = metrics.deviceFrames.labels({ direction: 'to_device' });
export const framesFromDevice = metrics.deviceFrames.labels({ direction: 'from_device' });

// Per phone accept and close: label children looked up once (a labelled inc hashes its labels every time).
export const deviceAuthOk = metrics.deviceAuth.labels({ outcome: 'ok' });
export const deviceAuthRejected = metrics.deviceAuth.labels({ outcome: 'rejected' });
const closeChildren = new Map<number, { inc(): void }>();

/** One phone socket closed with this code. */
export function countDeviceClose(code: number): void {
  let c = closeChildren.get(code);
  if (!c) {
    c = metrics.deviceCloses.labels({ code: String(code) });
    // Codes come from the peer: a bounded set of children, the rest counted without the cache.
    if (closeChildren.size < 64) closeChildren.set(code, c);
  }
  c.inc();
}
