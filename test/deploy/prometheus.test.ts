// A real Prometheus (Debian's `prometheus`) scrapes a real two-node cluster (Redis + Postgres)
// every second while phones pair and the official SDK client calls tools across nodes. Through
// Prometheus's HTTP API: every metric family of docs/OPERATIONS.md's catalogue exists, no label
// value looks like an id or a secret, every query of the Grafana dashboard returns data, and
// the chart's alert rules (rendered by helm, loaded into this Prometheus) evaluate without error.
// The traffic includes what makes each family move: refused keys, bodies and phone frames over
// 256 KiB, a pairing rate limit, 2026-07-28 requests, Last-Event-ID resumptions, and a bare bus
// node (in this process) that owns a phone and answers `redo`, then says goodbye.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { request as httpRequest } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { renderDashboardJson } from '../../deploy/grafana/dashboard.ts';
import { newApiToken, newId, newPairingCode, sha256Hex } from '../../src/crypto/secrets.ts';
import { dashboardQueries, dashboardVariableQueries, substituteVariables } from './dashboard-queries.ts';
import { sleep, startTestCluster, waitFor, type ClusterPhone, type TestCluster } from '../cluster/harness.ts';
import { challenge, openSocket, pairRaw, signedHeaders } from '../helpers/raw-device.ts';
import { createPairing } from '../../src/provisioning.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { RedisBus } from '../../src/bus/redis/index.ts';
import { quietLog, REDIS_URL } from '../../src/bus/redis/test-support.ts';
import { farewellMessage } from '../../src/gateway/node-messages.ts';
import { newStreamId } from '../../src/gateway/session-streams.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PROMETHEUS = process.env.PROMETHEUS ?? '/usr/bin/prometheus';
const havePrometheus = existsSync(PROMETHEUS);
// The labels the chart's ServiceMonitor gives the series (release "pb" in namespace "relay"), so
// that the chart's alert rules, rendered by helm, select these very series.
const JOB = 'pb-phonebridge-admin';
const NAMESPACE = 'relay';
const HELM = join(ROOT, '.tools', 'helm');
const haveHelm = existsSync(HELM);
// Grafana's $__rate_interval is at least four scrape intervals; a minute covers the whole run.
const RATE_INTERVAL = '1m';

/** What a label value of ours must never look like: ids, tokens, keys, pairing codes. */
const SECRET_LIKE: Array<[string, RegExp]> = [
  // An id's prefix followed by its random part (newId: 16 base64url characters), not a word such
  // as the limiter key_in_flight.
  ['id or token prefix', /^(dev|key|pb|acc|acct|usr|ses|sess)_[A-Za-z0-9_-]{12,}/],
  ['long hex run', /[0-9a-f]{16,}|[0-9A-F]{16,}/],
  ['long base64 run with digits', /(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+_-]{20,}/],
  ['pairing code', /(?:[A-Z2-7]{4}-){2,}[A-Z2-7]{4}/],
  ['uuid', /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i],
];

/** The metric names of the catalogue table under "Health and metrics" in docs/OPERATIONS.md. */
function catalogue(): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'OPERATIONS.md'), 'utf8');
  const section = doc.split(/^## /m).find((s) => s.startsWith('Health and metrics'));
  if (!section) throw new Error('docs/OPERATIONS.md has no "Health and metrics" section');
  return [...section.matchAll(/^\|\s*`(phonebridge_[a-z0-9_]+)`\s*\|/gm)].map((m) => m[1]);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** The chart's PrometheusRule (every alert on), as a Prometheus rule file. */
async function chartRules(dir: string): Promise<string> {
  const valuesFile = join(dir, 'values.json');
  writeFileSync(
    valuesFile,
    JSON.stringify({
      publicUrl: 'https://relay.example.com',
      serviceMonitor: { enabled: true },
      prometheusRule: { enabled: true },
    }),
  );
  const out = await new Promise<string>((resolve, reject) =>
    execFile(
      HELM,
      ['template', 'pb', join(ROOT, 'helm', 'phonebridge'), '--namespace', NAMESPACE, '-f', valuesFile],
      { timeout: 30_000, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => (err ? reject(new Error(`helm template: ${stderr}`)) : resolve(stdout)),
    ),
  );
  const rule = parseAllDocuments(out)
    .map((d) => d.toJS())
    .find((d) => d?.kind === 'PrometheusRule');
  if (!rule) throw new Error('the chart rendered no PrometheusRule');
  return stringifyYaml(rule.spec);
}

type Sample = { metric: Record<string, string>; value?: [number, string] };

// Skipped only without the binary: `${PROMETHEUS}` comes with Debian's package `prometheus`
// (.ci/run installs it); PROMETHEUS=/path/to/prometheus uses another copy.
describe.skipIf(!havePrometheus)(`a real Prometheus (${PROMETHEUS}) scraping a two-node cluster`, () => {
  let tc: TestCluster;
  let prom: ChildProcess | undefined;
  let promUrl = '';
  let promLog = '';
  const dir = mkdtempSync(join(tmpdir(), 'pb-prom-'));
  const clients: Client[] = [];
  const secrets: string[] = [];
  const transports: StreamableHTTPClientTransport[] = [];

  async function api(path: string, params: Record<string, string | string[]> = {}): Promise<any> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const x of [v].flat()) qs.append(k, x);
    const res = await fetch(`${promUrl}/api/v1/${path}?${qs.toString()}`, { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as { status: string; data: any; error?: string };
    if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.error}`);
    return body.data;
  }
  const query = async (expr: string): Promise<Sample[]> => (await api('query', { query: expr })).result;

  async function sdkClient(base: string, token: string): Promise<Client> {
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: { 'X-Api-Key': token } },
    });
    const client = new Client({ name: 'prometheus-test', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    transports.push(transport);
    return client;
  }

  beforeAll(async () => {
    tc = await startTestCluster({ nodes: 2 });
    const [A, B] = tc.nodes as [(typeof tc.nodes)[0], (typeof tc.nodes)[0]];
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    const ruleFiles: string[] = [];
    if (haveHelm) {
      writeFileSync(join(dir, 'rules.yaml'), await chartRules(dir));
      ruleFiles.push(join(dir, 'rules.yaml'));
    }
    const config = {
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: ruleFiles,
      scrape_configs: [
        {
          job_name: JOB,
          static_configs: [
            { targets: tc.nodes.map((n) => `127.0.0.1:${n.adminPort}`), labels: { namespace: NAMESPACE } },
          ],
        },
      ],
    };
    writeFileSync(join(dir, 'prometheus.yml'), stringifyYaml(config));
    prom = spawn(
      PROMETHEUS,
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    prom.stderr!.on('data', (c: Buffer) => (promLog = (promLog + c.toString()).slice(-4000)));
    await waitFor(
      async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.status === 200,
      15_000,
      'Prometheus ready',
    ).catch((err) => {
      throw new Error(`${(err as Error).message}; its log: ${promLog}`);
    });

    // Traffic: two phones (one per node), a client on each node, calls that cross nodes.
    const phoneA: ClusterPhone = await tc.phone({ node: A, name: 'phone on A' });
    const phoneB: ClusterPhone = await tc.phone({ node: B, name: 'phone on B' });
    const tokenA = await tc.key(phoneA.deviceId);
    const tokenB = await tc.key(phoneB.deviceId);
    secrets.push(phoneA.deviceId, phoneB.deviceId, tokenA, tokenB);
    const viaB = await sdkClient(B.url, tokenA);
    const viaA = await sdkClient(A.url, tokenA);
    const offline = await sdkClient(A.url, tokenB);
    await offline.listTools();
    // A wrong pairing code (bad_code) with a well-formed key.
    const spki = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .publicKey.export({ type: 'spki', format: 'der' })
      .toString('base64');
    const bad = await fetch(`${A.url}/pair`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'A'.repeat(32), public_key: spki, name: 'guess' }),
    });
    expect(bad.status).toBe(403);
    // Phone B leaves (a close code on node B); its client's calls now end in device_offline.
    await phoneB.stop();
    await waitFor(async () => (await tc.ownerOf(phoneB.deviceId)) === undefined, 10_000, 'phone B released');
    let offlineErrors = 0;
    const until = Date.now() + 6000;
    for (let i = 0; Date.now() < until && i < 2000; i++) {
      const r = await viaB.callTool({ name: 'echo', arguments: { text: `cross ${i}` } });
      expect(r.content).toEqual([{ type: 'text', text: `cross ${i}` }]);
      await viaA.callTool({ name: 'echo', arguments: { text: `local ${i}` } });
      if (i % 10 === 0) {
        await viaA.listTools();
        const r = await offline.callTool({ name: 'echo', arguments: { text: 'nobody' } }).catch((e: Error) => e);
        if (r instanceof Error || r.isError) offlineErrors++;
      }
      await sleep(20);
    }
    expect(offlineErrors).toBeGreaterThan(0);
    // A fleet allocation (allocate, then release) on phone A: the fleet panels' series move.
    // After the loop above, so Prometheus has scraped the histogram at 0 first: a series whose
    // first sample already holds the observation has no rate, and its quantile is NaN.
    await tc.store.store.fleet.updateLabels(phoneA.deviceId, { set: { pool: 'metrics' }, remove: [] });
    const fleetKey = await createFleetKey(tc.store.store, {
      accountId: 'local',
      selector: 'pool=metrics',
      scopes: ['devices:read', 'devices:act', 'devices:lease'],
    });
    secrets.push(fleetKey.token);
    const fleetApi = (method: string, path: string, body?: unknown) =>
      fetch(`${A.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${fleetKey.token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const allocated = await fleetApi('POST', '/api/v1/allocations', { selector: { pool: 'metrics' }, ttl_s: 60 });
    expect(allocated.status).toBe(201);
    const { id: allocationId } = (await allocated.json()) as { id: string };
    expect((await fleetApi('DELETE', `/api/v1/allocations/${allocationId}`)).status).toBe(204);
    const sessionIds = transports.map((t) => t.sessionId).filter((s): s is string => !!s);
    expect(sessionIds).toHaveLength(3);
    secrets.push(...sessionIds);
    await refusals(A, tc, tokenA);
    await statelessAndResumes(A, tokenA, tokenB);
    await ownerThatSendsBack(A, B, tc, phoneB.deviceId, offline);
    // Two more scrapes after the last call, so the counters' final values are in.
    await sleep(2500);
  }, 120_000);

  /** 401s (no key, a wrong key), 413 (a body over 256 KiB), 1009 (a phone frame over 256 KiB), 429 (pairing). */
  async function refusals(A: TestCluster['nodes'][0], tc: TestCluster, token: string): Promise<void> {
    const post = (headers: Record<string, string>) =>
      fetch(`${A.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
    expect((await post({})).status).toBe(401);
    expect((await post({ 'x-api-key': 'not-a-key-of-this-relay' })).status).toBe(401);
    // The relay answers 413 as soon as the body passes 256 KiB and closes the connection.
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${A.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': token },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end(Buffer.alloc(300 * 1024, 0x20));
    });
    expect(status).toBe(413);
    // A phone of its own, driven by hand, that sends a frame over 256 KiB.
    const qr = await createPairing(tc.store.store, { relay: tc.url, name: 'raw' });
    const raw = await pairRaw(A.url, qr.code);
    secrets.push(raw.deviceId);
    const sock = await openSocket(A.url, signedHeaders(raw, await challenge(A.url, raw.deviceId)));
    await sock.nextFrame((f) => f.method === 'initialize');
    sock.ws.send('x'.repeat(300 * 1024));
    expect((await sock.closed).code).toBe(1009);
    // Four more wrong codes from this address (five in all), then the limit: 429.
    const spki = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .publicKey.export({ type: 'spki', format: 'der' })
      .toString('base64');
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${A.url}/pair`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: 'A'.repeat(32), public_key: spki, name: 'guess' }),
      });
      statuses.push(r.status);
    }
    expect(statuses).toEqual([403, 403, 403, 403, 429]);
  }

  /**
   * 2026-07-28 requests (server/discover, tools/list), an initialize answered from the store
   * (phone B is offline), and GETs resuming a GET stream and a POST stream by Last-Event-ID.
   */
  async function statelessAndResumes(A: TestCluster['nodes'][0], tokenA: string, tokenB: string): Promise<void> {
    const V = '2026-07-28';
    const meta = {
      'io.modelcontextprotocol/protocolVersion': V,
      'io.modelcontextprotocol/clientInfo': { name: 'prometheus-test', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    for (const method of ['server/discover', 'tools/list']) {
      const r = await fetch(`${A.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'x-api-key': tokenA,
          'mcp-protocol-version': V,
          'mcp-method': method,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: { _meta: meta } }),
      });
      expect(r.status, method).toBe(200);
      expect(((await r.json()) as { result?: unknown }).result, method).toBeDefined();
    }
    const init = await fetch(`${A.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-api-key': tokenB,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'cache', version: '1' } },
      }),
    });
    expect(init.status).toBe(200);
    const sessionId = init.headers.get('mcp-session-id')!;
    secrets.push(sessionId);
    for (const lastEventId of [`${newStreamId()}:1`, `${newStreamId({ deadline: Date.now() + 1000 })}:1`]) {
      const abort = new AbortController();
      const r = await fetch(`${A.url}/mcp`, {
        headers: {
          accept: 'text/event-stream',
          'x-api-key': tokenB,
          'mcp-session-id': sessionId,
          'mcp-protocol-version': '2025-11-25',
          'last-event-id': lastEventId,
        },
        signal: abort.signal,
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/event-stream');
      abort.abort();
    }
  }

  /**
   * A bare bus node Z (this process) claims the offline phone B: node A sends Z that phone's
   * calls; Z answers the first with `redo` moving and the next with `redo` gone (A routes each
   * again, then gives up: device_offline). Then Z keeps one call, releases the phone and says
   * goodbye to both nodes: A routes the call again, and it ends when the phone does not come back.
   */
  async function ownerThatSendsBack(
    A: TestCluster['nodes'][0],
    B: TestCluster['nodes'][0],
    tc: TestCluster,
    deviceId: string,
    client: Client,
  ): Promise<void> {
    const z = await RedisBus.connect(REDIS_URL, `z-${process.pid}-${Date.now()}`, quietLog, { prefix: tc.prefix });
    try {
      let mode: 'send back' | 'keep' = 'send back';
      let heard = 0;
      z.onNodeMessage((m) => {
        const h = JSON.parse(m.slice(0, m.indexOf('\n'))) as { t: string; rid: number; from: string };
        if (h.t !== 'req') return;
        heard++;
        if (mode === 'keep') return;
        const why = heard === 1 ? 'moving' : 'gone';
        void z.sendToNode(h.from, `${JSON.stringify({ t: 'redo', rid: h.rid, why })}\n`);
      });
      const epoch = await z.claimDevice(deviceId);
      const sentBack = await client.callTool({ name: 'echo', arguments: { text: 'z' } }).catch((e: Error) => e);
      expect(sentBack instanceof Error || sentBack.isError).toBe(true);
      expect(heard).toBeGreaterThanOrEqual(4); // moving, then gone until A gives up
      mode = 'keep';
      const before = heard;
      const kept = client.callTool({ name: 'echo', arguments: { text: 'kept' } }).catch((e: Error) => e);
      await waitFor(() => heard > before, 5000, 'Z holds a call');
      await z.releaseDevice(deviceId, epoch);
      for (const node of [A.id, B.id]) expect(await z.sendToNode(node, farewellMessage(z.nodeId))).toBe(true);
      const end = await kept;
      expect(end instanceof Error || end.isError).toBe(true);
    } finally {
      await z.close();
    }
  }

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    if (prom && prom.exitCode === null) {
      const exited = new Promise((r) => prom!.once('exit', r));
      prom.kill('SIGTERM');
      await Promise.race([exited, sleep(5000)]);
      if (prom.exitCode === null) prom.kill('SIGKILL');
    }
    await tc?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('scrapes both nodes', async () => {
    const up = await query(`up{job="${JOB}"}`);
    expect(up.map((s) => s.value![1])).toEqual(['1', '1']);
  });

  it('counts, in every family the traffic touched, what that traffic did', async () => {
    const sel = `job="${JOB}"`;
    const value = async (expr: string) => {
      const r = await query(expr);
      return r.length === 0 ? undefined : Number(r[0].value![1]);
    };
    const [nodeA, nodeB] = tc.nodes.map((n) => `127.0.0.1:${n.adminPort}`);
    const atLeast: Array<[string, number]> = [
      [`sum(phonebridge_client_auth_failures_total{${sel}, reason="missing"})`, 1],
      [`sum(phonebridge_client_auth_failures_total{${sel}, reason="invalid"})`, 1],
      [`sum(phonebridge_frames_too_big_total{${sel}, side="client"})`, 1],
      [`sum(phonebridge_frames_too_big_total{${sel}, side="phone"})`, 1],
      [`sum(phonebridge_rate_limited_total{${sel}, limiter="pair_failures"})`, 1],
      [`sum(phonebridge_http_responses_total{${sel}, route="/mcp", status="401"})`, 2],
      [`sum(phonebridge_http_responses_total{${sel}, route="/mcp", status="413"})`, 1],
      [`sum(phonebridge_http_responses_total{${sel}, route="/pair", status="429"})`, 1],
      [`sum(phonebridge_http_responses_total{${sel}, route="/mcp", status="200"})`, 100],
      [`sum(phonebridge_mcp_requests_total{${sel}, era="stateless", outcome="ok"})`, 2],
      [`sum(phonebridge_mcp_requests_total{${sel}, era="session", method="tools/call", outcome="ok"})`, 100],
      // socket: the phone's socket is on the node that answers (A: viaA, server/discover); store:
      // it is elsewhere or offline (B: viaB; A: `offline` and the raw initialize for phone B).
      [`sum(phonebridge_initialize_cache_total{${sel}, source="socket"})`, 2],
      [`sum(phonebridge_initialize_cache_total{${sel}, source="store"})`, 3],
      [`sum(phonebridge_sse_replays_total{${sel}, stream="get"})`, 1],
      [`sum(phonebridge_sse_replays_total{${sel}, stream="post"})`, 1],
      // Calls through B to the phone on A: B is their origin, A their owner.
      [`sum(phonebridge_cross_node_requests_total{${sel}, instance="${nodeB}", role="origin"})`, 50],
      [`sum(phonebridge_cross_node_requests_total{${sel}, instance="${nodeA}", role="owner"})`, 50],
      [`sum(phonebridge_bus_round_trip_seconds_count{${sel}, instance="${nodeB}"})`, 50],
      // Each cross-node call publishes its request and its answer, both on the quiet connection:
      // each counts once its batch is confirmed (docs/decisions/0225-quiet-requests.md).
      [`sum(phonebridge_bus_publish_duration_seconds_count{${sel}})`, 100],
      [`sum(phonebridge_redis_command_duration_seconds_count{${sel}})`, 100],
      [`sum(phonebridge_store_query_duration_seconds_count{${sel}, outcome="ok"})`, 10],
      [`sum(phonebridge_reroutes_total{${sel}, instance="${nodeA}", reason="moving"})`, 1],
      [`sum(phonebridge_reroutes_total{${sel}, instance="${nodeA}", reason="gone"})`, 2],
      [`sum(phonebridge_reroutes_total{${sel}, instance="${nodeA}", reason="node_left"})`, 1],
      [`sum(phonebridge_goodbyes_total{${sel}, direction="received"})`, 2],
      [`sum(phonebridge_bytes_total{${sel}, side="client", direction="in"})`, 300 * 1024],
      [`sum(phonebridge_bytes_total{${sel}, side="phone", direction="in"})`, 300 * 1024],
      [`sum(phonebridge_bytes_total{${sel}, side="client", direction="out"})`, 10_000],
      [`sum(phonebridge_bytes_total{${sel}, side="phone", direction="out"})`, 10_000],
    ];
    const short: string[] = [];
    for (const [expr, min] of atLeast) {
      const v = await value(expr);
      if (v === undefined || v < min) short.push(`${expr} = ${v} (expected ≥ ${min})`);
    }
    expect(short).toEqual([]);
    // Per node: both healthy, neither draining, nothing left pending.
    for (const [expr, want] of [
      [`phonebridge_store_up{${sel}}`, '1'],
      [`phonebridge_redis_up{${sel}}`, '1'],
      [`phonebridge_draining{${sel}}`, '0'],
      [`phonebridge_pending_requests{${sel}, role="origin"}`, '0'],
    ] as const)
      expect(
        (await query(expr)).map((s) => s.value![1]),
        expr,
      ).toEqual([want, want]);
  });

  it("has every metric family of docs/OPERATIONS.md's catalogue", async () => {
    const names = catalogue();
    expect(names.length).toBeGreaterThanOrEqual(27);
    const have = new Set<string>(await api('label/__name__/values', { 'match[]': `{job="${JOB}"}` }));
    const missing = names.filter((n) => ![n, `${n}_bucket`, `${n}_count`].some((s) => have.has(s)));
    expect(missing, 'catalogue metrics Prometheus never saw').toEqual([]);
  });

  it('exports no label value that looks like an id, a token or a pairing code', async () => {
    const series: Array<Record<string, string>> = await api('series', {
      'match[]': `{job="${JOB}", __name__=~"phonebridge_.+"}`,
    });
    expect(series.length).toBeGreaterThan(50);
    const values = new Map<string, string>();
    for (const s of series) for (const [k, v] of Object.entries(s)) if (k !== '__name__') values.set(`${k}=${v}`, v);
    expect(values.size).toBeGreaterThan(20);
    const bad: string[] = [];
    for (const [pair, v] of values) {
      for (const [what, re] of SECRET_LIKE) if (re.test(v)) bad.push(`${pair} (${what})`);
      for (const s of secrets) if (v.includes(s)) bad.push(`${pair} (holds a real id or token)`);
    }
    expect(bad).toEqual([]);
    // The shape checks catch what the relay's own generators make (the random session ids are
    // covered by the exact comparison above: a base64url id may, by chance, hold no digit).
    const samples = [newApiToken(), newId('dev'), newId('key'), sha256Hex('x'), newPairingCode(), randomUUID()];
    for (const s of samples)
      expect(
        SECRET_LIKE.some(([, re]) => re.test(s)),
        s.slice(0, 4),
      ).toBe(true);
  });

  // The rules need .tools/helm to render (bash scripts/ensure-helm.sh; CI builds it).
  it.skipIf(!haveHelm)(
    "evaluates every alert rule of the chart on the cluster's real series without error",
    async () => {
      await waitFor(
        async () => {
          const groups: any[] = (await api('rules')).groups;
          const rules = groups.flatMap((g) => g.rules);
          return rules.length > 0 && rules.every((r) => r.lastEvaluation && !r.lastEvaluation.startsWith('0001'));
        },
        10_000,
        'every rule evaluated once',
      );
      const rules: any[] = (await api('rules')).groups.flatMap((g: any) => g.rules);
      expect(rules.length).toBeGreaterThanOrEqual(10);
      expect(rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`)).toEqual([]);
      // The selectors reach the scraped series: the relay-side expressions have something to act on.
      const nodes = await query(`up{job="${JOB}", namespace="${NAMESPACE}"} == 1`);
      expect(nodes).toHaveLength(2);
    },
  );

  it('answers every dashboard query with data', async () => {
    const d = JSON.parse(renderDashboardJson());
    const queries = dashboardQueries(d);
    expect(queries.length).toBeGreaterThanOrEqual(20);
    const empty: string[] = [];
    for (const { panel, expr } of queries) {
      const promql = substituteVariables(expr, JOB, RATE_INTERVAL);
      const result = await query(promql);
      const numbers = result.filter((s) => !Number.isNaN(Number(s.value![1])));
      if (numbers.length === 0) empty.push(`${panel}: ${promql} → ${JSON.stringify(result).slice(0, 200)}`);
    }
    expect(empty, 'dashboard queries without data').toEqual([]);
    for (const v of dashboardVariableQueries(d)) {
      const values: string[] = await api(`label/${v.label}/values`, {
        'match[]': substituteVariables(v.selector, JOB, RATE_INTERVAL),
      });
      expect(values.length, `variable ${v.name}`).toBeGreaterThan(0);
      if (v.label === 'instance') expect(values).toHaveLength(2);
    }
  });
});
