// Traces end to end: two `phonebridge serve` processes on one Redis export over OTLP/HTTP
// (protobuf) to a receiver in this test, the phone (in this process) exports over OTLP/HTTP
// (JSON) to the same receiver, and one tools/call from the official SDK client that carried
// `_meta.traceparent` must land as one trace: client → SERVER (origin) → PRODUCER → CONSUMER
// (owner) → CLIENT (phone round trip) → the phone's own span. Then: with tracing off, nothing
// of the pipeline exists and the frame the phone receives is what it always was.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestCluster, waitFor, type ClusterPhone, type TestCluster } from '../cluster/harness.ts';
import type { ClusterNode } from '../../services/cluster.ts';
import { KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.ts';
import { relayTracingState, TracingConfigError, tracingOn, type Tracing } from '../../src/observability/tracing.ts';
import { createTracing, tracingConfigFromEnv } from '../../src/observability/tracing-pipeline.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { completeHandshake, openSocket, pairRaw, challenge, signedHeaders } from '../helpers/raw-device.ts';
import { openSession, post } from '../helpers/raw-mcp.ts';
import { SCOPES } from '../../src/store/types.ts';

const PROMETHEUS = process.env.PROMETHEUS ?? '/usr/bin/prometheus';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createNetServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** Every string a span holds: name, attribute and event values, status message. */
function strings(s: ReceivedSpan): string[] {
  const out: string[] = [s.name, s.status.message];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') out.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(s.attributes);
  for (const e of s.events) {
    out.push(e.name);
    walk(e.attributes);
  }
  walk(s.resource);
  return out;
}

describe('traces across two nodes and a phone', () => {
  let receiver: OtlpReceiver;
  let tc: TestCluster;
  let A: ClusterNode, B: ClusterNode;
  let phone: ClusterPhone;
  let phoneTracing: Tracing;
  let token: string;
  const logs: Array<{ node: string; line: any }> = [];

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    tc = await startTestCluster({
      nodes: 2,
      serveArgs: ['--log-level', 'debug'],
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_SERVICE_NAME: '',
      },
      onLog: (node, line) => {
        try {
          logs.push({ node, line: JSON.parse(line) });
        } catch {
          // not a log line
        }
      },
    });
    [A, B] = tc.nodes;
    phoneTracing = createTracing({
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      defaultServiceName: 'phonebridge-device',
      instanceId: 'test-phone',
      scope: 'phonebridge-device',
    })!;
    phone = await tc.phone({ node: A, name: 'traced phone', tracing: phoneTracing });
    token = await tc.key(phone.deviceId);
    expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);
  }, 90_000);

  afterAll(async () => {
    await tc?.stop();
    await phoneTracing?.shutdown();
    await receiver?.close();
  }, 60_000);

  it('one tools/call from a client that sent _meta.traceparent is one trace, hop by hop', async () => {
    const marker = `ARG-${randomBytes(6).toString('hex')}`;
    const clientTrace = randomBytes(16).toString('hex');
    const clientSpan = randomBytes(8).toString('hex');
    const transport = new StreamableHTTPClientTransport(new URL(`${B.url}/mcp`), {
      requestInit: { headers: { 'X-Api-Key': token } },
    });
    const client = new Client({ name: 'traced-client', version: '1.0.0' });
    await client.connect(transport);
    const r = await client.callTool({
      name: 'echo',
      arguments: { text: marker },
      _meta: { traceparent: `00-${clientTrace}-${clientSpan}-01` },
    });
    expect(r.content).toEqual([{ type: 'text', text: marker }]);
    const sessionId = transport.sessionId!;
    await client.close();

    const inTrace = () => receiver.spans.filter((s) => s.traceId === clientTrace);
    const find = (kind: number, service: string) =>
      inTrace().find((s) => s.kind === kind && s.resource['service.name'] === service);
    await waitFor(
      () => inTrace().length >= 5 && find(KIND.server, 'phonebridge-device') !== undefined,
      15_000,
      'the five spans of the call',
    );
    const spans = inTrace();
    const server = spans.find((s) => s.kind === KIND.server && s.resource['service.name'] === 'phonebridge')!;
    const producer = spans.find((s) => s.kind === KIND.producer)!;
    const consumer = spans.find((s) => s.kind === KIND.consumer)!;
    const client2phone = spans.find((s) => s.kind === KIND.client && s.resource['service.name'] === 'phonebridge')!;
    const onPhone = find(KIND.server, 'phonebridge-device')!;
    for (const s of [server, producer, consumer, client2phone, onPhone]) expect(s).toBeDefined();

    // Parent → child, hop by hop.
    expect(server.parentSpanId).toBe(clientSpan);
    expect(producer.parentSpanId).toBe(server.spanId);
    expect(consumer.parentSpanId).toBe(producer.spanId);
    expect(client2phone.parentSpanId).toBe(consumer.spanId);
    expect(onPhone.parentSpanId).toBe(client2phone.spanId);
    // The phone was handed the relay's context, not the client's.
    const meta = phone.control.calls.at(-1)!.meta as Record<string, unknown>;
    expect(meta.traceparent).toBe(`00-${clientTrace}-${client2phone.spanId}-01`);

    // Where each span was made, and how it travelled.
    expect(server.resource['service.instance.id']).toBe(B.id);
    expect(producer.resource['service.instance.id']).toBe(B.id);
    expect(consumer.resource['service.instance.id']).toBe(A.id);
    expect(client2phone.resource['service.instance.id']).toBe(A.id);
    expect(onPhone.resource['service.instance.id']).toBe('test-phone');
    for (const s of [server, producer, consumer, client2phone]) {
      expect(s.resource['service.name']).toBe('phonebridge');
      expect(s.resource['service.version']).toBe(VERSION);
      expect(s.encoding).toBe('protobuf');
    }
    expect(onPhone.encoding).toBe('json');
    expect(onPhone.resource['service.version']).toBe(VERSION);

    // The MCP semantic conventions on the SERVER span.
    expect(server.name).toBe('tools/call echo');
    expect(server.attributes).toMatchObject({
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'echo',
      'gen_ai.operation.name': 'execute_tool',
      'mcp.session.id': sessionId,
      'network.transport': 'tcp',
    });
    expect(server.attributes['mcp.protocol.version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(typeof server.attributes['jsonrpc.request.id']).toBe('string');
    expect(server.attributes['error.type']).toBeUndefined();
    expect(server.status.code).not.toBe(2);
    expect(producer.attributes).toMatchObject({
      'messaging.destination.name': A.id,
      'mcp.method.name': 'tools/call',
    });
    expect(consumer.attributes['messaging.source.name']).toBe(B.id);
    expect(client2phone.name).toBe('tools/call echo');
    expect(client2phone.attributes['network.protocol.name']).toBe('websocket');
    expect(onPhone.name).toBe('tools/call echo');
    expect(onPhone.attributes['gen_ai.tool.name']).toBe('echo');

    // Nothing of the call's content or secrets in any span: not the key, not the argument
    // (the echo's result is the same marker), in any value or in the raw bodies sent.
    for (const s of receiver.spans)
      for (const v of strings(s)) {
        expect(v).not.toContain(marker);
        expect(v).not.toContain(token);
      }
    for (const body of receiver.bodies) {
      expect(body.includes(marker)).toBe(false);
      expect(body.includes(token)).toBe(false);
    }

    // The origin's request log line names the SERVER span.
    await waitFor(
      () => logs.some((l) => l.node === B.id && l.line.msg === 'mcp request' && l.line.trace_id === clientTrace),
      5_000,
      'the request log line',
    );
    const line = logs.find((l) => l.node === B.id && l.line.msg === 'mcp request' && l.line.trace_id === clientTrace)!;
    expect(line.line.span_id).toBe(server.spanId);

    // The latency histogram carries the trace id as an exemplar, in OpenMetrics.
    const om = await fetch(`http://127.0.0.1:${B.adminPort}/metrics`, {
      headers: { accept: 'application/openmetrics-text; version=1.0.0' },
    });
    expect(om.headers.get('content-type')).toContain('application/openmetrics-text');
    const text = await om.text();
    expect(text.trimEnd().endsWith('# EOF')).toBe(true);
    expect(text).toMatch(
      new RegExp(
        `phonebridge_mcp_request_duration_seconds_bucket\\{[^}]*method="tools/call"[^}]*\\} \\d+ # \\{trace_id="[0-9a-f]{32}"\\}`,
      ),
    );
    expect(text).toContain(`trace_id="${clientTrace}"`);
    expect(text).toContain('# TYPE phonebridge_mcp_requests counter');
    expect(text).toMatch(/^phonebridge_mcp_requests_total\{/m);
    expect(text).not.toContain('_total_total');
    // Prometheus text stays as it was.
    const plain = await fetch(`http://127.0.0.1:${B.adminPort}/metrics`);
    expect(plain.headers.get('content-type')).toContain('text/plain');
    const plainText = await plain.text();
    expect(plainText).toContain('# TYPE phonebridge_mcp_requests_total counter');
    expect(plainText).not.toContain('trace_id=');
  }, 60_000);

  // Debian's prometheus package (installed by .ci/run); without it there is no real scraper to ask.
  it.skipIf(!existsSync(PROMETHEUS))(
    'a real Prometheus scrapes the OpenMetrics answer: same series names, the trace ids as exemplars',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'pb-prom-otel-'));
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      writeFileSync(
        join(dir, 'prometheus.yml'),
        stringifyYaml({
          global: { scrape_interval: '1s', scrape_timeout: '1s' },
          scrape_configs: [{ job_name: 'pb', static_configs: [{ targets: [`127.0.0.1:${B.adminPort}`] }] }],
        }),
      );
      const prom = spawn(
        PROMETHEUS,
        [
          `--config.file=${join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--enable-feature=exemplar-storage',
          '--log.level=warn',
        ],
        { stdio: 'ignore' },
      );
      try {
        const since = Date.now() / 1000 - 60;
        const api = async (path: string) => ((await (await fetch(`${url}${path}`)).json()) as { data: any }).data;
        let exemplars: Array<{
          seriesLabels: Record<string, string>;
          exemplars: Array<{ labels: { trace_id?: string } }>;
        }> = [];
        await waitFor(
          async () => {
            exemplars =
              (await api(
                `/api/v1/query_exemplars?query=${encodeURIComponent('phonebridge_mcp_request_duration_seconds_bucket')}&start=${since}&end=${Date.now() / 1000 + 60}`,
              ).catch(() => undefined)) ?? [];
            return exemplars.length > 0;
          },
          20_000,
          'exemplars in Prometheus',
        );
        const traceIds = exemplars.flatMap((e) => e.exemplars.map((x) => x.labels.trace_id));
        expect(traceIds.length).toBeGreaterThan(0);
        for (const id of traceIds) expect(id).toMatch(/^[0-9a-f]{32}$/);
        // Every exemplar names a trace the receiver holds a span of.
        for (const id of traceIds) expect(receiver.spans.some((s) => s.traceId === id)).toBe(true);
        const counted = await api(`/api/v1/query?query=${encodeURIComponent('phonebridge_mcp_requests_total')}`);
        expect(counted.result.length).toBeGreaterThan(0);
        const doubled = await api(`/api/v1/query?query=${encodeURIComponent('phonebridge_mcp_requests_total_total')}`);
        expect(doubled.result).toEqual([]);
      } finally {
        prom.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    },
    40_000,
  );

  it('continues the W3C traceparent header when _meta carries none, and marks a relay error', async () => {
    const t = randomBytes(16).toString('hex');
    const p = randomBytes(8).toString('hex');
    const transport = new StreamableHTTPClientTransport(new URL(`${B.url}/mcp`), {
      requestInit: { headers: { 'X-Api-Key': token, traceparent: `00-${t}-${p}-01` } },
    });
    const client = new Client({ name: 'traced-client', version: '1.0.0' });
    await client.connect(transport);
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow();
    await client.close();
    await waitFor(
      () => receiver.spans.some((s) => s.traceId === t && s.attributes['gen_ai.tool.name'] === 'no_such_tool'),
      15_000,
      'the refused call span',
    );
    const s = receiver.spans.find((x) => x.traceId === t && x.attributes['gen_ai.tool.name'] === 'no_such_tool')!;
    expect(s.parentSpanId).toBe(p);
    expect(s.kind).toBe(KIND.server);
    expect(s.attributes['error.type']).toBe('-32602');
    expect(s.attributes['rpc.response.status_code']).toBe('-32602');
    expect(s.status.code).toBe(2);
    // initialize is answered by the relay itself: its span is in the same (header) trace.
    expect(receiver.spans.some((x) => x.traceId === t && x.name === 'initialize' && x.kind === KIND.server)).toBe(true);
  }, 30_000);

  it("the client's tracestate header crosses the bus with the traceparent, and reaches the phone", async () => {
    // W3C Trace Context §3.3: a tracestate received goes on to outgoing requests; the phone's
    // node writes it into _meta as a single node would (docs/decisions/0111).
    const t = randomBytes(16).toString('hex');
    const transport = new StreamableHTTPClientTransport(new URL(`${B.url}/mcp`), {
      requestInit: {
        headers: {
          'X-Api-Key': token,
          traceparent: `00-${t}-${randomBytes(8).toString('hex')}-01`,
          tracestate: 'vendor=abc,other=t61rcWkgMzE',
        },
      },
    });
    const client = new Client({ name: 'traced-client', version: '1.0.0' });
    await client.connect(transport);
    await client.callTool({ name: 'echo', arguments: { text: 'tracestate' } });
    await client.close();
    const onPhone = () =>
      receiver.spans.find((s) => s.traceId === t && s.resource['service.name'] === 'phonebridge-device');
    const consumer = () => receiver.spans.find((s) => s.traceId === t && s.kind === KIND.consumer);
    // Each process exports in its own batches: the two spans arrive in either order.
    await waitFor(
      () => onPhone() !== undefined && consumer() !== undefined,
      15_000,
      "the phone's and the owner's spans",
    );
    // The phone's span continued the _meta its node wrote: the client's tracestate came with it.
    expect(onPhone()!.traceState).toBe('vendor=abc,other=t61rcWkgMzE');
    expect(consumer()!.traceState).toBe('vendor=abc,other=t61rcWkgMzE');
  }, 30_000);

  it('a call the client cancels ends cancelled on every hop, the phone included', async () => {
    const t = randomBytes(16).toString('hex');
    const p = randomBytes(8).toString('hex');
    const transport = new StreamableHTTPClientTransport(new URL(`${B.url}/mcp`), {
      requestInit: { headers: { 'X-Api-Key': token } },
    });
    const client = new Client({ name: 'traced-client', version: '1.0.0' });
    await client.connect(transport);
    const ac = new AbortController();
    const call = client.callTool(
      { name: 'sleep', arguments: { ms: 10_000 }, _meta: { traceparent: `00-${t}-${p}-01` } },
      undefined,
      { signal: ac.signal },
    );
    await waitFor(() => phone.control.calls.some((c) => c.name === 'sleep'), 5_000, 'the call on the phone');
    ac.abort();
    await expect(call).rejects.toThrow();
    const inTrace = () => receiver.spans.filter((s) => s.traceId === t);
    const onPhone = () => inTrace().find((s) => s.resource['service.name'] === 'phonebridge-device');
    await waitFor(() => onPhone() !== undefined && inTrace().length >= 5, 15_000, 'the cancelled spans');
    expect(onPhone()!.attributes['error.type']).toBe('cancelled');
    expect(onPhone()!.status.code).toBe(2);
    for (const kind of [KIND.server, KIND.consumer, KIND.client]) {
      const s = inTrace().find((x) => x.kind === kind && x.resource['service.name'] === 'phonebridge')!;
      expect(s.attributes['error.type']).toBe('cancelled');
    }
    await client.close();
  }, 30_000);

  it('revision 2026-07-28: a call and server/discover continue _meta.traceparent, across the bus', async () => {
    const stateless = async (method: string, params: Record<string, unknown>, traceparent: string) => {
      const r = await fetch(`${B.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'x-api-key': token,
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': method,
          ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 'x1',
          method,
          params: {
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
              'io.modelcontextprotocol/clientCapabilities': {},
              traceparent,
            },
          },
        }),
      });
      expect(r.status).toBe(200);
      await r.text();
    };
    const t = randomBytes(16).toString('hex');
    const p = randomBytes(8).toString('hex');
    await stateless('tools/call', { name: 'echo', arguments: { text: 'x' } }, `00-${t}-${p}-01`);
    await stateless('server/discover', {}, `00-${t}-${p}-01`);
    const inTrace = () => receiver.spans.filter((s) => s.traceId === t);
    await waitFor(() => inTrace().length >= 6, 15_000, 'the stateless spans');
    const server = inTrace().find(
      (s) => s.name === 'tools/call echo' && s.kind === KIND.server && s.resource['service.name'] === 'phonebridge',
    )!;
    expect(server.parentSpanId).toBe(p);
    expect(server.attributes['mcp.protocol.version']).toBe('2026-07-28');
    expect(server.attributes['mcp.session.id']).toBeUndefined();
    expect(server.attributes['jsonrpc.request.id']).toBe('x1');
    const onPhone = inTrace().find((s) => s.resource['service.name'] === 'phonebridge-device')!;
    const producer = inTrace().find((s) => s.kind === KIND.producer)!;
    expect(producer.parentSpanId).toBe(server.spanId);
    expect(inTrace().find((s) => s.kind === KIND.client)!.spanId).toBe(onPhone.parentSpanId);
    const discover = inTrace().find((s) => s.name === 'server/discover')!;
    expect(discover.parentSpanId).toBe(p);
  }, 30_000);

  it("the phone's socket life and the pairing are traced, with no code or key in them", async () => {
    await waitFor(
      () =>
        receiver.spans.some((s) => s.name === 'phonebridge.device.auth') &&
        receiver.spans.some((s) => s.name === 'phonebridge.device.handshake') &&
        receiver.spans.some((s) => s.name === 'POST /pair'),
      15_000,
      'device spans',
    );
    const auth = receiver.spans.find(
      (s) => s.name === 'phonebridge.device.auth' && s.attributes['phonebridge.device.auth.outcome'] === 'ok',
    )!;
    const handshake = receiver.spans.find(
      (s) => s.name === 'phonebridge.device.handshake' && s.traceId === auth.traceId,
    )!;
    expect(handshake.parentSpanId).toBe(auth.spanId);
    const pair = receiver.spans.find((s) => s.name === 'POST /pair')!;
    expect(pair.attributes['phonebridge.pair.outcome']).toBe('paired');
  });
});

describe('tracing off', () => {
  let relay: TestRelay;

  beforeAll(async () => {
    relay = await startTestRelay();
  });
  afterAll(async () => {
    await relay?.stop();
  });

  it('reads only the standard variables, and without an endpoint builds nothing', () => {
    expect(tracingConfigFromEnv({}, 'phonebridge')).toBeUndefined();
    expect(createTracing({ env: {}, defaultServiceName: 'x', instanceId: 'n' })).toBeUndefined();
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
    expect(tracingConfigFromEnv({ ...endpoint, OTEL_SDK_DISABLED: 'true' }, 'p')).toBeUndefined();
    expect(tracingConfigFromEnv({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }, 'p')).toBeUndefined();
    const on = tracingConfigFromEnv({ ...endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }, 'phonebridge')!;
    expect(on).toMatchObject({
      url: 'http://127.0.0.1:4318/v1/traces',
      protocol: 'http/json',
      serviceName: 'phonebridge',
    });
    expect(
      tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom', OTEL_SERVICE_NAME: 's' }, 'p'),
    ).toMatchObject({ url: 'http://c:4318/custom', protocol: 'http/protobuf', serviceName: 's' });
    expect(() => tracingConfigFromEnv({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'p')).toThrow(
      TracingConfigError,
    );
    expect(() => tracingConfigFromEnv({ ...endpoint, OTEL_TRACES_SAMPLER: 'sometimes' }, 'p')).toThrow(
      /OTEL_TRACES_SAMPLER "sometimes" is not supported/,
    );
    expect(() => tracingConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://x' }, 'p')).toThrow(/http\(s\) URL/);
  });

  it('no exporter or processor exists, and the frame forwarded to the phone is byte for byte what it was', async () => {
    expect(tracingOn).toBe(false);
    expect(relayTracingState()).toEqual({ on: false });

    const qr = await relay.pair('raw');
    const raw = await pairRaw(relay.url, qr.code);
    const s = await openSocket(relay.url, signedHeaders(raw, await challenge(relay.url, raw.deviceId)));
    const texts: string[] = [];
    s.ws.on('message', (d) => texts.push((d as Buffer).toString('utf8')));
    // The handshake, with one tool in the catalog.
    const listed = s.nextFrame((f) => f.method === 'tools/list');
    await completeHandshake(s);
    const list = await listed;
    s.ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: list.id,
        result: {
          tools: [{ name: 'echo', inputSchema: { type: 'object' }, _meta: { 'phonebridge/scope': 'devices:read' } }],
        },
      }),
    );
    const key = await relay.key(raw.deviceId);
    const headers = await openSession(relay.mcpUrl, key.token);
    const traceparent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
    const call = post(
      relay.mcpUrl,
      headers,
      JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'hi' }, _meta: { traceparent, tracestate: 'a=b' } },
      }),
    );
    const forwarded = await s.nextFrame((f) => f.method === 'tools/call');
    const text = texts.find((t) => t.includes('"tools/call"'))!;
    expect(text).toBe(
      JSON.stringify({
        jsonrpc: '2.0',
        id: forwarded.id,
        method: 'tools/call',
        params: {
          name: 'echo',
          arguments: { text: 'hi' },
          _meta: { traceparent, tracestate: 'a=b', 'phonebridge/caller': { credential: key.id, scopes: [...SCOPES] } },
        },
      }),
    );
    s.ws.send(
      JSON.stringify({ jsonrpc: '2.0', id: forwarded.id, result: { content: [{ type: 'text', text: 'hi' }] } }),
    );
    expect((await call).status).toBe(200);
    s.ws.close();
  });
});
