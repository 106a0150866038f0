// A real Prometheus (Debian's `prometheus`) scrapes a real two-node cluster (Redis + Postgres)
// every second while phones pair and the official SDK client calls tools across nodes. Through
// Prometheus's HTTP API: every metric family of docs/OPERATIONS.md's catalogue exists, no label
// value looks like an id or a secret, every query of the Grafana dashboard returns data, and
// the chart's alert rules (rendered by helm, loaded into this Prometheus) evaluate without error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { renderDashboardJson } from '../../deploy/grafana/dashboard.ts';
import { newApiToken, newId, newPairingCode, sha256Hex } from '../../src/crypto/secrets.ts';
import { dashboardQueries, dashboardVariableQueries, substituteVariables } from './dashboard-queries.ts';
import { sleep, startTestCluster, waitFor, type ClusterPhone, type TestCluster } from '../cluster/harness.ts';

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
  ['id or token prefix', /^(dev|key|pb|acc|acct|usr|ses|sess)_/],
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
    const sessionIds = transports.map((t) => t.sessionId).filter((s): s is string => !!s);
    expect(sessionIds).toHaveLength(3);
    secrets.push(...sessionIds);
    // Two more scrapes after the last call, so the counters' final values are in.
    await sleep(2500);
  }, 60_000);

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

  it("has every metric family of docs/OPERATIONS.md's catalogue", async () => {
    const names = catalogue();
    expect(names.length).toBeGreaterThanOrEqual(9);
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
