// The Helm chart (helm/phonebridge) as an operator renders it: `helm lint --strict` and
// `helm template` with several value sets, the rendered YAML parsed and checked against what
// the relay really reads (src/config.ts) and really exports (src/metrics.ts).
// Needs `.tools/helm` (bash scripts/ensure-helm.sh); promtool is used when present.
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { parseRelayConfig } from '../../src/config.ts';
import { parseRedisUrl } from '../../src/bus/redis/topology.ts';
import { registry } from '../../src/metrics.ts';
import { renderDashboardJson } from '../../deploy/grafana/dashboard.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HELM = join(ROOT, '.tools', 'helm');
const CHART = join(ROOT, 'helm', 'phonebridge');
const haveHelm = existsSync(HELM);
// promtool (Debian package `prometheus`) is optional: PROMTOOL names one, else /usr/bin/promtool.
const PROMTOOL = [process.env.PROMTOOL, '/usr/bin/promtool'].find((p): p is string => !!p && existsSync(p));

const PUBLIC_URL = 'https://relay.example.com';
const BASE = { publicUrl: PUBLIC_URL };

type Values = Record<string, unknown>;
type K8s = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: any;
  [k: string]: any;
};
interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const tmp = mkdtempSync(join(tmpdir(), 'pb-helm-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let fileNo = 0;

function run(cmd: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { maxBuffer: 16 << 20, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err
        ? typeof (err as { code?: unknown }).code === 'number'
          ? (err as { code: number }).code
          : 1
        : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Values go in as a file (JSON is YAML), so nothing is reinterpreted by --set's syntax. */
function valuesFile(values: Values): string {
  const f = join(tmp, `values-${++fileNo}.json`);
  writeFileSync(f, JSON.stringify(values));
  return f;
}

async function template(values: Values, release = 'pb', namespace = 'relay'): Promise<Run> {
  return run(HELM, ['template', release, CHART, '--namespace', namespace, '-f', valuesFile(values)]);
}

async function render(values: Values = BASE, release = 'pb', namespace = 'relay'): Promise<K8s[]> {
  const r = await template(values, release, namespace);
  if (r.code !== 0) throw new Error(`helm template failed (${r.code}): ${r.stderr}`);
  return docsOf(r.stdout);
}

function docsOf(yaml: string): K8s[] {
  const docs = parseAllDocuments(yaml);
  for (const d of docs) if (d.errors.length) throw new Error(`rendered YAML does not parse: ${d.errors[0].message}`);
  return docs.map((d) => d.toJS() as K8s).filter((d) => d && typeof d === 'object');
}

/** Why the relay refuses what `values` render, or undefined when helm refuses them itself. */
async function relayRefusalOfRender(values: Values): Promise<string | undefined> {
  const r = await template(values);
  if (r.code !== 0) return undefined;
  try {
    parseRelayConfig([], processEnvOf(gateway(docsOf(r.stdout))));
    return 'rendered, and the relay starts with it';
  } catch (err) {
    return `rendered, and the relay refuses it: ${(err as Error).message}`;
  }
}

function one(docs: K8s[], kind: string, name?: string): K8s {
  const found = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata.name === name));
  expect(
    found.map((d) => `${d.kind}/${d.metadata.name}`),
    `exactly one ${kind}${name ? ` ${name}` : ''}`,
  ).toHaveLength(1);
  return found[0];
}

function gateway(docs: K8s[]): any {
  const dep = one(docs, 'Deployment');
  return dep.spec.template.spec.containers.find((c: any) => c.name === 'gateway');
}

function envOf(container: any): Map<string, any> {
  return new Map((container.env as any[]).map((e) => [e.name, e]));
}

/** Secret contents the kubelet would put in the gateway's environment. */
const SECRETS: Record<string, string> = {
  'database-url': 'postgres://u:p@pg:5432/pb',
  'redis-url': 'redis://redis:6379',
};

/** What the kubelet would give the gateway process: plain values, the pod's name and address, secret contents. */
function processEnvOf(container: any): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container.env as any[]) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.name') env[e.name] = 'pb-phonebridge-7d9f-abcde';
    else if (e.valueFrom?.fieldRef?.fieldPath === 'status.podIP') env[e.name] = '10.1.2.3';
    else if (e.valueFrom?.secretKeyRef) env[e.name] = SECRETS[e.valueFrom.secretKeyRef.key]!;
  }
  return env;
}

/** The container port a probe or Service targetPort (a name or a number) lands on. */
function containerPort(container: any, port: string | number): number {
  if (typeof port === 'number') return port;
  const p = (container.ports as any[]).find((x) => x.name === port);
  expect(p, `container port named ${port}`).toBeDefined();
  return p.containerPort;
}

/** Every series name the relay exposes on /metrics, read from its real registry. */
async function relayMetricNames(): Promise<Set<string>> {
  const text = await registry.metrics();
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
  }
  return names;
}

function labelNamesOf(series: string): string[] {
  const base = series.replace(/_(bucket|sum|count)$/, '');
  const m = (registry.getSingleMetric(series) ?? registry.getSingleMetric(base)) as unknown as
    { labelNames?: readonly string[] } | undefined;
  return [...(m?.labelNames ?? []), ...(series.endsWith('_bucket') ? ['le'] : [])];
}

// In CI the chart must really be checked: a missing helm is a failure, not a skip.
describe.runIf(!!process.env.CI && !haveHelm)('helm chart (CI without helm)', () => {
  it('finds .tools/helm', () => {
    throw new Error('.tools/helm is missing: run `bash scripts/ensure-helm.sh` first (.ci/run does, before npm test)');
  });
});

// Outside CI a developer may not have built helm yet (a cold build takes ~5 min): these tests
// are skipped then, and `bash scripts/ensure-helm.sh` enables them.
describe.skipIf(!haveHelm)('helm chart helm/phonebridge', () => {
  it('passes helm lint --strict with the minimal and a full value set', async () => {
    const full = {
      ...BASE,
      database: { url: 'postgres://pb:secret@pg:5432/phonebridge' },
      redis: { url: 'redis://redis:6379', prefix: 'pb-prod:' },
      ingress: { enabled: true, className: 'nginx', tls: [{ secretName: 'relay-tls', hosts: ['relay.example.com'] }] },
      serviceMonitor: { enabled: true },
      prometheusRule: { enabled: true },
      autoscaling: { enabled: true },
      extraEnv: [{ name: 'PHONEBRIDGE_REQUEST_TIMEOUT_MS', value: '45000' }],
      grafana: { dashboard: { enabled: true } },
      networkPolicy: { enabled: true },
    };
    for (const values of [BASE, full]) {
      const r = await run(HELM, ['lint', '--strict', CHART, '-f', valuesFile(values)]);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/0 chart\(s\) failed/);
    }
  });

  it('fails the render with a clear message without publicUrl, or with a non-http one', async () => {
    const none = await template({});
    expect(none.code).not.toBe(0);
    expect(none.stderr).toMatch(/publicUrl is required/);
    expect(none.stderr).toMatch(/load balancer's public URL/);
    const bad = await template({ publicUrl: 'relay.example.com' });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/publicUrl must start with https:\/\/ or http:\/\//);
  });

  it('renders only the core objects by default', async () => {
    const docs = await render();
    expect(docs.map((d) => d.kind).sort()).toEqual([
      'Deployment',
      'PodDisruptionBudget',
      'Service',
      'Service',
      'ServiceAccount',
    ]);
    for (const kind of [
      'Ingress',
      'ServiceMonitor',
      'PrometheusRule',
      'Secret',
      'HorizontalPodAutoscaler',
      'ConfigMap',
      'NetworkPolicy',
    ]) {
      expect(
        docs.some((d) => d.kind === kind),
        kind,
      ).toBe(false);
    }
    expect(one(docs, 'Deployment').spec.replicas).toBe(3);
  });

  it('sets the env the relay reads: parseRelayConfig sees the chart values', async () => {
    const docs = await render({
      ...BASE,
      drainMs: 40000,
      logLevel: 'debug',
      redis: { existingSecret: 'redis', prefix: 'pb-a:' },
    });
    const c = gateway(docs);
    const env = envOf(c);
    expect(env.get('PHONEBRIDGE_NODE_ID').valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
    expect(env.get('PHONEBRIDGE_NODE_ID').value).toBeUndefined();
    // Metrics and probes on the pod's address only (the relay's default is loopback).
    expect(env.get('PHONEBRIDGE_ADMIN_HOST').valueFrom).toEqual({ fieldRef: { fieldPath: 'status.podIP' } });
    const processEnv = processEnvOf(c);
    for (const name of Object.keys(processEnv)) expect(name).toMatch(/^PHONEBRIDGE_[A-Z_]+$/);
    const config = parseRelayConfig([], processEnv);
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 8080,
      adminPort: 9464,
      adminHost: '10.1.2.3',
      publicUrl: PUBLIC_URL,
      publicUrlExplicit: true,
      relayHost: 'relay.example.com',
      nodeId: 'pb-phonebridge-7d9f-abcde',
      drainMs: 40000,
      logLevel: 'debug',
      databaseUrl: SECRETS['database-url'],
      redisUrl: SECRETS['redis-url'],
      redisPrefix: 'pb-a:',
      dataDir: '/data',
      trustProxy: false,
    });
    expect(c.ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'admin', containerPort: 9464, protocol: 'TCP' },
    ]);
    // Service links would add PHONEBRIDGE_<SERVICE>_PORT=tcp://… variables the relay would read.
    expect(one(docs, 'Deployment').spec.template.spec.enableServiceLinks).toBe(false);
  });

  // A value set the relay would refuse must fail at install (helm template), not render an
  // environment every pod exits 2 on in a crash loop after a "successful" install.
  it('refuses at render the values whose rendered setting the relay refuses: trustedHops 0, a drainMs past the timer limit', async () => {
    for (const values of [
      { ...BASE, ingress: { enabled: true }, trustedHops: 0 },
      { ...BASE, drainMs: 3_000_000_000 },
    ]) {
      const outcome = await relayRefusalOfRender(values);
      expect(outcome, `${JSON.stringify(values)}: ${outcome}`).toBeUndefined();
    }
    // At their limits they render, and the relay takes them.
    const c = gateway(await render({ ...BASE, ingress: { enabled: true }, trustedHops: 1, drainMs: 2_147_483_647 }));
    expect(parseRelayConfig([], processEnvOf(c))).toMatchObject({ trustedHops: 1, drainMs: 2_147_483_647 });
  });

  it('renders podDisruptionBudget.maxUnavailable 0 as 0 (no voluntary eviction), not as the default 1', async () => {
    const pdb = one(
      await render({ ...BASE, podDisruptionBudget: { enabled: true, maxUnavailable: 0 } }),
      'PodDisruptionBudget',
    );
    expect(pdb.spec.maxUnavailable).toBe(0);
    expect(one(await render(BASE), 'PodDisruptionBudget').spec.maxUnavailable).toBe(1);
  });

  it('points the probes at /readyz and /healthz on the admin port', async () => {
    for (const values of [BASE, { ...BASE, containerPorts: { client: 8000, admin: 9000 } }]) {
      const c = gateway(await render(values));
      const admin = containerPort(c, 'admin');
      expect(admin).toBe((values as any).containerPorts?.admin ?? 9464);
      expect(c.readinessProbe.httpGet.path).toBe('/readyz');
      expect(containerPort(c, c.readinessProbe.httpGet.port)).toBe(admin);
      expect(c.livenessProbe.httpGet.path).toBe('/healthz');
      expect(containerPort(c, c.livenessProbe.httpGet.port)).toBe(admin);
      expect(c.startupProbe.httpGet.path).toBe('/healthz');
      expect(containerPort(c, c.startupProbe.httpGet.port)).toBe(admin);
      expect(envOf(c).get('PHONEBRIDGE_ADMIN_PORT').value).toBe(String(admin));
      expect(containerPort(c, 'http')).not.toBe(admin);
    }
  });

  it('gives pods a termination grace period longer than the drain', async () => {
    for (const [drainMs, preStop] of [
      [25000, 5],
      [60000, 5],
      [1500, 0],
      [90001, 12],
    ] as const) {
      const docs = await render({ ...BASE, drainMs, lifecycle: { preStopSleepSeconds: preStop } });
      const pod = one(docs, 'Deployment').spec.template.spec;
      const c = gateway(docs);
      expect(envOf(c).get('PHONEBRIDGE_DRAIN_MS').value).toBe(String(drainMs));
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(drainMs / 1000 + preStop);
      expect(Number.isInteger(pod.terminationGracePeriodSeconds)).toBe(true);
      if (preStop > 0) expect(c.lifecycle.preStop.exec.command).toEqual(['sleep', String(preStop)]);
      else expect(c.lifecycle).toBeUndefined();
    }
    const none = await template({ ...BASE, terminationGraceMarginSeconds: 0 });
    expect(none.code).not.toBe(0);
    expect(none.stderr).toMatch(/terminationGraceMarginSeconds must be >= 1/);
  });

  it('takes the database and Redis URLs from Secrets only', async () => {
    const dbUrl = 'postgres://pb:s3cret@pg.db:5432/phonebridge';
    const redisUrl = 'redis://:r3dis@redis:6379/0';
    const cases: Array<{ values: Values; db: [string, string]; redis: [string, string]; chartSecret: boolean }> = [
      {
        values: BASE,
        db: ['pb-phonebridge', 'database-url'],
        redis: ['pb-phonebridge', 'redis-url'],
        chartSecret: false,
      },
      {
        values: { ...BASE, database: { url: dbUrl }, redis: { url: redisUrl } },
        db: ['pb-phonebridge', 'database-url'],
        redis: ['pb-phonebridge', 'redis-url'],
        chartSecret: true,
      },
      {
        values: {
          ...BASE,
          database: { existingSecret: 'cnpg-app', secretKey: 'uri' },
          redis: { existingSecret: 'redis-conn', secretKey: 'url' },
        },
        db: ['cnpg-app', 'uri'],
        redis: ['redis-conn', 'url'],
        chartSecret: false,
      },
      {
        values: { ...BASE, database: { url: dbUrl }, redis: { existingSecret: 'redis-conn' } },
        db: ['pb-phonebridge', 'database-url'],
        redis: ['redis-conn', 'redis-url'],
        chartSecret: true,
      },
    ];
    for (const { values, db, redis, chartSecret } of cases) {
      const docs = await render(values);
      const dep = one(docs, 'Deployment');
      const env = envOf(gateway(docs));
      for (const [name, [secret, key]] of [
        ['PHONEBRIDGE_DATABASE_URL', db],
        ['PHONEBRIDGE_REDIS_URL', redis],
      ] as const) {
        expect(env.get(name).value, `${name} must not be a plain value`).toBeUndefined();
        expect(env.get(name).valueFrom).toEqual({ secretKeyRef: { name: secret, key } });
      }
      const text = JSON.stringify(dep);
      expect(text).not.toContain('s3cret');
      expect(text).not.toContain('r3dis');
      const secrets = docs.filter((d) => d.kind === 'Secret');
      expect(secrets.length).toBe(chartSecret ? 1 : 0);
      if (chartSecret) {
        const s = secrets[0];
        expect(s.metadata.name).toBe('pb-phonebridge');
        expect(s.stringData['database-url']).toBe(dbUrl);
        // The pods roll when the URLs change.
        expect(dep.spec.template.metadata.annotations['checksum/secret']).toMatch(/^[0-9a-f]{64}$/);
      }
    }
    const half = await template({ ...BASE, database: { url: dbUrl } });
    expect(half.code).not.toBe(0);
    expect(half.stderr).toMatch(/redis: set redis\.url or redis\.existingSecret/);
    const both = await template({
      ...BASE,
      database: { url: dbUrl, existingSecret: 'x' },
      redis: { existingSecret: 'y' },
    });
    expect(both.code).not.toBe(0);
    expect(both.stderr).toMatch(/either database\.existingSecret or database\.url/);
  });

  it('templates each Redis topology: the URL the relay parses, checked against redis.topology, the sentinels opened in egress', async () => {
    const cases: Array<{ topology: string; url: string; kind: string; egress: string[] }> = [
      { topology: 'single', url: 'rediss://:r3dis@redis:6379/1', kind: 'single', egress: ['TCP/6379'] },
      {
        topology: 'sentinel',
        url: 'redis+sentinel://:r3dis@s1:26379,s2:26379,s3:26379/mymaster',
        kind: 'sentinel',
        egress: ['TCP/6379', 'TCP/26379'],
      },
      {
        topology: 'cluster',
        url: 'redis+cluster://:r3dis@n1:6379,n2:6379,n3:6379',
        kind: 'cluster',
        egress: ['TCP/6379'],
      },
    ];
    for (const { topology, url, kind, egress } of cases) {
      const values = {
        ...BASE,
        database: { url: 'postgres://pb@pg:5432/pb' },
        redis: { topology, url },
        networkPolicy: { enabled: true },
      };
      const docs = await render(values);
      const secret = one(docs, 'Secret');
      expect(secret.stringData['redis-url']).toBe(url);
      // What the pod gets is what serve accepts, as the topology the chart was told.
      const cfg = parseRelayConfig([], { PHONEBRIDGE_REDIS_URL: secret.stringData['redis-url'] });
      expect(parseRedisUrl(cfg.redisUrl!).kind).toBe(kind);
      expect(JSON.stringify(one(docs, 'Deployment'))).not.toContain('r3dis');
      const np = one(docs, 'NetworkPolicy');
      expect(
        (np.spec.egress as any[])[2].ports.map((p: any) => `${p.protocol}/${p.port}`),
        topology,
      ).toEqual(egress);
    }
    // A URL of another topology than the one named fails the render, saying which scheme it needs.
    const wrong = await template({
      ...BASE,
      database: { url: 'postgres://pb@pg:5432/pb' },
      redis: { topology: 'cluster', url: 'redis://redis:6379' },
    });
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/redis\.topology is cluster, so redis\.url must start with redis\+cluster:\/\//);
    const unknown = await template({ ...BASE, redis: { topology: 'ring', existingSecret: 'r' } });
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/topology/);
    const scheme = await template({ ...BASE, database: { url: 'postgres://pb@pg/pb' }, redis: { url: 'http://r' } });
    expect(scheme.code).not.toBe(0);
    expect(scheme.stderr).toMatch(/redis\.url|url/);
  });

  it('runs locked down: non-root, read-only root with emptyDirs at /data and /tmp, no capabilities', async () => {
    const docs = await render();
    const pod = one(docs, 'Deployment').spec.template.spec;
    const c = gateway(docs);
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(c.securityContext).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const mounts = new Map((c.volumeMounts as any[]).map((m) => [m.mountPath, m.name]));
    for (const path of ['/data', '/tmp']) {
      const vol = (pod.volumes as any[]).find((v) => v.name === mounts.get(path));
      expect(vol?.emptyDir, `emptyDir at ${path}`).toBeDefined();
    }
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(c.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(c.resources.limits.memory).toBeDefined();
  });

  it('rolls and spreads for availability: maxUnavailable 0, PDB, anti-affinity, topology spread', async () => {
    const docs = await render();
    const dep = one(docs, 'Deployment');
    expect(dep.spec.strategy).toMatchObject({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0 } });
    const pod = dep.spec.template.spec;
    const selector = dep.spec.selector.matchLabels;
    expect(
      pod.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm,
    ).toMatchObject({
      topologyKey: 'kubernetes.io/hostname',
      labelSelector: { matchLabels: selector },
    });
    expect(pod.topologySpreadConstraints.map((t: any) => t.topologyKey)).toContain('kubernetes.io/hostname');
    for (const t of pod.topologySpreadConstraints) expect(t.labelSelector.matchLabels).toEqual(selector);
    const pdb = one(docs, 'PodDisruptionBudget');
    expect(pdb.apiVersion).toBe('policy/v1');
    expect(pdb.spec).toMatchObject({ maxUnavailable: 1, selector: { matchLabels: selector } });
    expect(pdb.spec.minAvailable).toBeUndefined();
    const hard = await render({ ...BASE, podAntiAffinityPreset: 'hard', podDisruptionBudget: { minAvailable: 2 } });
    expect(
      one(hard, 'Deployment').spec.template.spec.affinity.podAntiAffinity
        .requiredDuringSchedulingIgnoredDuringExecution,
    ).toHaveLength(1);
    expect(one(hard, 'PodDisruptionBudget').spec).toMatchObject({ minAvailable: 2 });
    expect(one(hard, 'PodDisruptionBudget').spec.maxUnavailable).toBeUndefined();
    const hpa = await render({ ...BASE, autoscaling: { enabled: true, minReplicas: 4 } });
    expect(one(hpa, 'Deployment').spec.replicas).toBeUndefined();
    expect(one(hpa, 'HorizontalPodAutoscaler').spec).toMatchObject({
      minReplicas: 4,
      scaleTargetRef: { kind: 'Deployment', name: 'pb-phonebridge' },
    });
  });

  it('serves clients on a ClusterIP Service without session affinity, and admin on its own Service', async () => {
    const docs = await render();
    const c = gateway(docs);
    const svc = one(docs, 'Service', 'pb-phonebridge');
    expect(svc.spec.type).toBe('ClusterIP');
    expect(svc.spec.sessionAffinity ?? 'None').toBe('None');
    expect(svc.spec.sessionAffinityConfig).toBeUndefined();
    expect(svc.spec.ports).toHaveLength(1);
    expect(svc.spec.ports[0].port).toBe(80);
    expect(containerPort(c, svc.spec.ports[0].targetPort)).toBe(8080);
    expect(svc.spec.selector).toEqual(one(docs, 'Deployment').spec.selector.matchLabels);
    const admin = one(docs, 'Service', 'pb-phonebridge-admin');
    expect(admin.spec.ports.map((p: any) => containerPort(c, p.targetPort))).toEqual([9464]);
    expect(admin.spec.publishNotReadyAddresses).toBe(true);
  });

  it("creates the Ingress only when enabled, for publicUrl's host, and trusts X-Forwarded-For only then", async () => {
    const off = await render();
    expect(off.some((d) => d.kind === 'Ingress')).toBe(false);
    expect(envOf(gateway(off)).has('PHONEBRIDGE_TRUST_PROXY')).toBe(false);
    const annotations = { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' };
    const on = await render({
      ...BASE,
      publicUrl: 'https://relay.example.com:8443/',
      ingress: { enabled: true, className: 'nginx', annotations },
    });
    const ing = one(on, 'Ingress');
    expect(ing.metadata.annotations).toEqual(annotations);
    expect(ing.spec.ingressClassName).toBe('nginx');
    expect(ing.spec.rules).toEqual([
      {
        host: 'relay.example.com',
        http: {
          paths: [
            { path: '/', pathType: 'Prefix', backend: { service: { name: 'pb-phonebridge', port: { number: 80 } } } },
          ],
        },
      },
    ]);
    const env = envOf(gateway(on));
    expect(env.get('PHONEBRIDGE_TRUST_PROXY').value).toBe('true');
    // The ingress is one hop: the right-most X-Forwarded-For entry is the client.
    expect(env.get('PHONEBRIDGE_TRUSTED_HOPS').value).toBe('1');
    expect(env.has('PHONEBRIDGE_TRUSTED_PROXIES')).toBe(false);
    const behindCdn = envOf(
      gateway(
        await render({
          ...BASE,
          ingress: { enabled: true },
          trustedHops: 2,
          trustedProxies: ['10.0.0.0/8', 'fd00::/8'],
        }),
      ),
    );
    expect(behindCdn.get('PHONEBRIDGE_TRUSTED_HOPS').value).toBe('2');
    expect(behindCdn.get('PHONEBRIDGE_TRUSTED_PROXIES').value).toBe('10.0.0.0/8,fd00::/8');
    expect(
      parseRelayConfig([], {
        PHONEBRIDGE_PUBLIC_URL: PUBLIC_URL,
        PHONEBRIDGE_TRUST_PROXY: 'true',
        PHONEBRIDGE_TRUSTED_HOPS: '2',
        PHONEBRIDGE_TRUSTED_PROXIES: '10.0.0.0/8,fd00::/8',
      }),
    ).toMatchObject({ trustProxy: true, trustedHops: 2, trustedProxies: ['10.0.0.0/8', 'fd00::/8'] });
    expect(env.get('PHONEBRIDGE_PUBLIC_URL').value).toBe('https://relay.example.com:8443');
    const forcedOff = await render({ ...BASE, ingress: { enabled: true }, trustProxy: false });
    expect(envOf(gateway(forcedOff)).has('PHONEBRIDGE_TRUST_PROXY')).toBe(false);
    const forcedOn = await render({ ...BASE, trustProxy: true });
    expect(envOf(gateway(forcedOn)).get('PHONEBRIDGE_TRUST_PROXY').value).toBe('true');
  });

  it('creates the ServiceMonitor only when enabled, scraping /metrics on the admin Service', async () => {
    expect((await render()).some((d) => d.kind === 'ServiceMonitor')).toBe(false);
    const docs = await render({ ...BASE, serviceMonitor: { enabled: true, additionalLabels: { release: 'kps' } } });
    const sm = one(docs, 'ServiceMonitor');
    expect(sm.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(sm.metadata.labels!.release).toBe('kps');
    expect(sm.spec.endpoints).toHaveLength(1);
    expect(sm.spec.endpoints[0]).toMatchObject({ port: 'admin', path: '/metrics' });
    expect(sm.spec.namespaceSelector).toEqual({ matchNames: ['relay'] });
    const matches = (svc: K8s) =>
      Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => svc.metadata.labels?.[k] === v);
    const services = docs.filter((d) => d.kind === 'Service');
    expect(services.filter(matches).map((s) => s.metadata.name)).toEqual(['pb-phonebridge-admin']);
    const admin = one(docs, 'Service', 'pb-phonebridge-admin');
    expect(admin.spec.ports.map((p: any) => p.name)).toContain(sm.spec.endpoints[0].port);
  });

  describe('PrometheusRule', () => {
    const withRules = { ...BASE, serviceMonitor: { enabled: true }, prometheusRule: { enabled: true } };

    it('appears only when enabled', async () => {
      expect((await render()).some((d) => d.kind === 'PrometheusRule')).toBe(false);
      const rule = one(await render(withRules), 'PrometheusRule');
      expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
      const alerts = rule.spec.groups.flatMap((g: any) => g.rules.map((r: any) => r.alert));
      expect(alerts).toEqual(
        expect.arrayContaining([
          'PhonebridgeNoReadyReplicas',
          'PhonebridgeMcpErrorRatioHigh',
          'PhonebridgeMcpLatencyP99High',
          'PhonebridgeDeviceAuthRejections',
          'PhonebridgeNodeScrapeFailing',
          'PhonebridgeEventLoopLagHigh',
          'PhonebridgeEventLoopStalls',
          'PhonebridgeDeviceRelayErrors',
          'PhonebridgeDeviceIdleCloses',
          'PhonebridgeStoreDown',
          'PhonebridgeRedisDown',
          'PhonebridgeBusPublishSlow',
          'PhonebridgeStoreSlow',
        ]),
      );
      const off = one(
        await render({
          ...withRules,
          prometheusRule: { enabled: true, alerts: { devicesDropped: { enabled: false } } },
        }),
        'PrometheusRule',
      );
      expect(JSON.stringify(off)).not.toContain('PhonebridgeDevicesDropped');
    });

    it('has a runbook entry in docs/OPERATIONS.md for every alert', async () => {
      const rule = one(await render(withRules), 'PrometheusRule');
      const alerts: string[] = rule.spec.groups.flatMap((g: any) => g.rules.map((r: any) => r.alert));
      expect(alerts.length).toBeGreaterThanOrEqual(10);
      const doc = readFileSync(join(ROOT, 'docs', 'OPERATIONS.md'), 'utf8');
      const runbook = doc.split(/^## /m).find((s) => s.startsWith('Alert runbook')) ?? '';
      const entries = [...runbook.matchAll(/^\*\*(Phonebridge\w+)\*\* \((critical|warning)\)\./gm)];
      const severity = new Map(entries.map((m) => [m[1], m[2]]));
      for (const r of rule.spec.groups.flatMap((g: any) => g.rules))
        expect(severity.get(r.alert), `runbook entry for ${r.alert}`).toBe(r.labels.severity);
      expect([...severity.keys()].sort()).toEqual([...alerts].sort());
    });

    it('uses only metrics and labels the relay really exports', async () => {
      const exported = await relayMetricNames();
      // Sanity: the registry read is the relay's, not an empty one.
      expect(exported).toContain('phonebridge_mcp_requests_total');
      const rule = one(await render(withRules), 'PrometheusRule');
      const exprs: string[] = rule.spec.groups.flatMap((g: any) => g.rules.map((r: any) => String(r.expr)));
      const used = new Set<string>();
      for (const expr of exprs) {
        // Every `name{…}` series selector, and every bare phonebridge_* name.
        for (const m of expr.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}/g)) {
          const [, name, matchers] = m as unknown as [string, string, string];
          used.add(name);
          if (!name.startsWith('phonebridge_')) continue;
          expect(exported, `metric ${name} in the PrometheusRule`).toContain(name);
          const allowed = new Set([...labelNamesOf(name), 'job', 'namespace', 'pod', 'instance']);
          for (const matcher of matchers
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)) {
            const label = matcher.split(/=~|!~|!=|=/)[0].trim();
            expect(allowed, `label ${label} of ${name}`).toContain(label);
          }
        }
        for (const m of expr.matchAll(/\bphonebridge_[a-z0-9_]+/g)) used.add(m[0]);
      }
      const relay = [...used].filter((n) => n.startsWith('phonebridge_'));
      expect(relay.length).toBeGreaterThanOrEqual(4);
      for (const name of relay) expect(exported, `metric ${name} in the PrometheusRule`).toContain(name);
      // Series from outside the relay: Prometheus' own `up` and kube-state-metrics.
      expect([...used].filter((n) => !n.startsWith('phonebridge_')).sort()).toEqual([
        'kube_deployment_status_replicas_available',
        'up',
      ]);
      // The selectors match what the ServiceMonitor scrapes.
      for (const expr of exprs.filter((e) => e.includes('phonebridge_')))
        expect(expr).toContain('job="pb-phonebridge-admin", namespace="relay"');
    });

    // promtool ships in Debian's `prometheus` package; the test installs nothing, so without
    // it these two checks are skipped (set PROMTOOL=/path/to/promtool to use another copy).
    it.skipIf(!PROMTOOL)('passes promtool check rules', async () => {
      const rule = one(await render(withRules), 'PrometheusRule');
      const file = join(tmp, 'rules.yaml');
      writeFileSync(file, stringifyYaml(rule.spec));
      const r = await run(PROMTOOL!, ['check', 'rules', file]);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/SUCCESS: \d+ rules found/);
    });

    it.skipIf(!PROMTOOL)(
      'fires the error-ratio, latency, auth, node-scrape, event-loop, 1011, store, Redis and bus alerts on synthetic relay series (promtool test rules)',
      async () => {
        const rule = one(await render(withRules), 'PrometheusRule');
        const rulesFile = join(tmp, 'rules-for-test.yaml');
        writeFileSync(rulesFile, stringifyYaml(rule.spec));
        const sel = 'job="pb-phonebridge-admin", namespace="relay"';
        // promtool compares annotations too: the summary with its rendered $value, the description as rendered.
        const rules: any[] = rule.spec.groups.flatMap((g: any) => g.rules);
        const fires = (alertname: string, labels: Record<string, string>, summary: string, severity = 'warning') => {
          const description = String(rules.find((r) => r.alert === alertname).annotations.description).replace(
            /\{\{ \$labels\.(\w+) \}\}/g,
            (_, l: string) => labels[l] ?? '',
          );
          return {
            eval_time: '30m',
            alertname,
            exp_alerts: [{ exp_labels: { severity, ...labels }, exp_annotations: { summary, description } }],
          };
        };
        const bucket = (le: string, series: string) => ({
          series: `phonebridge_mcp_request_duration_seconds_bucket{${sel}, pod="a", method="tools/list", le="${le}"}`,
          values: series,
        });
        const tests = {
          rule_files: [rulesFile],
          evaluation_interval: '1m',
          tests: [
            {
              interval: '1m',
              input_series: [
                // 60 ok and 10 error requests a minute: 14 % errors, over the 5 % threshold.
                {
                  series: `phonebridge_mcp_requests_total{${sel}, pod="a", method="tools/call", outcome="ok"}`,
                  values: '0+60x40',
                },
                {
                  series: `phonebridge_mcp_requests_total{${sel}, pod="a", method="tools/call", outcome="error"}`,
                  values: '0+10x40',
                },
                // 60 rejected phone authentications a minute = 1/s, over 0.5/s.
                { series: `phonebridge_device_auth_total{${sel}, pod="a", outcome="rejected"}`, values: '0+60x40' },
                { series: `phonebridge_device_auth_total{${sel}, pod="a", outcome="ok"}`, values: '0+5x40' },
                // tools/list answered in 2.5–5 s: p99 above 2 s.
                bucket('2.5', '0+0x40'),
                bucket('5', '0+100x40'),
                bucket('+Inf', '0+100x40'),
                { series: `up{${sel}, pod="a", instance="10.0.0.1:9464"}`, values: '1x40' },
                // Node b stopped answering scrapes ten minutes in; its pod is still there.
                { series: `up{${sel}, pod="b", instance="10.0.0.2:9464"}`, values: '1x10 0x30' },
                // Node a's event loop is 0.5 s late at p99; node b's only 10 ms.
                {
                  series: `phonebridge_process_nodejs_eventloop_lag_p99_seconds{${sel}, pod="a", instance="10.0.0.1:9464"}`,
                  values: '0.5x40',
                },
                {
                  series: `phonebridge_process_nodejs_eventloop_lag_p99_seconds{${sel}, pod="b", instance="10.0.0.2:9464"}`,
                  values: '0.01x40',
                },
                // Node a's loop stalled for 1–2.5 s in one window, 20 minutes in; node b's windows all
                // stay under 50 ms. Node c stalls as a does, its buckets as Prometheus 3 stores them
                // (`le` in float form: "1.0"), which the rule must match too.
                ...[
                  ['a', '10.0.0.1:9464', '0.05', '0+60x20 1260+60x20'],
                  ['a', '10.0.0.1:9464', '1', '0+60x20 1260+60x20'],
                  ['a', '10.0.0.1:9464', '+Inf', '0+60x20 1261+60x20'],
                  ['b', '10.0.0.2:9464', '0.05', '0+60x40'],
                  ['b', '10.0.0.2:9464', '1', '0+60x40'],
                  ['b', '10.0.0.2:9464', '+Inf', '0+60x40'],
                  ['c', '10.0.0.3:9464', '0.05', '0+60x20 1260+60x20'],
                  ['c', '10.0.0.3:9464', '1.0', '0+60x20 1260+60x20'],
                  ['c', '10.0.0.3:9464', '+Inf', '0+60x20 1261+60x20'],
                ].map(([pod, instance, le, values]) => ({
                  series: `phonebridge_event_loop_delay_seconds_bucket{${sel}, pod="${pod}", instance="${instance}", le="${le}"}`,
                  values,
                })),
                ...[
                  ['a', '10.0.0.1:9464', '0+60x20 1261+60x20'],
                  ['b', '10.0.0.2:9464', '0+60x40'],
                  ['c', '10.0.0.3:9464', '0+60x20 1261+60x20'],
                ].map(([pod, instance, values]) => ({
                  series: `phonebridge_event_loop_delay_seconds_count{${sel}, pod="${pod}", instance="${instance}"}`,
                  values,
                })),
                // 30 phone sockets closed with 1011 a minute = 0.5/s (Postgres away); 1000s do not count.
                { series: `phonebridge_device_closes_total{${sel}, pod="a", code="1011"}`, values: '0+30x40' },
                { series: `phonebridge_device_closes_total{${sel}, pod="a", code="1000"}`, values: '0+600x40' },
                // 6 phone sockets a minute closed at their silence limit (0.1/s): half-open sockets.
                { series: `phonebridge_device_closes_total{${sel}, pod="a", code="1001"}`, values: '0+6x40' },
                // Node a lost its store ten minutes in; node b lost Redis from the start.
                { series: `phonebridge_store_up{${sel}, pod="a", instance="10.0.0.1:9464"}`, values: '1x10 0x30' },
                { series: `phonebridge_store_up{${sel}, pod="b", instance="10.0.0.2:9464"}`, values: '1x40' },
                { series: `phonebridge_redis_up{${sel}, pod="a", instance="10.0.0.1:9464"}`, values: '1x40' },
                { series: `phonebridge_redis_up{${sel}, pod="b", instance="10.0.0.2:9464"}`, values: '0x40' },
                // Node a's publishes take 50–100 ms (p99 above 50 ms); node b's stay under 1 ms.
                ...[
                  ['a', '10.0.0.1:9464', '0.05', '0+0x40'],
                  ['a', '10.0.0.1:9464', '0.1', '0+100x40'],
                  ['a', '10.0.0.1:9464', '+Inf', '0+100x40'],
                  ['b', '10.0.0.2:9464', '0.001', '0+100x40'],
                  ['b', '10.0.0.2:9464', '+Inf', '0+100x40'],
                ].map(([pod, instance, le, values]) => ({
                  series: `phonebridge_bus_publish_duration_seconds_bucket{${sel}, pod="${pod}", instance="${instance}", le="${le}"}`,
                  values,
                })),
                // Store queries take 1–2.5 s: p99 above 1 s.
                ...[
                  ['1', '0+0x40'],
                  ['2.5', '0+100x40'],
                  ['+Inf', '0+100x40'],
                ].map(([le, values]) => ({
                  series: `phonebridge_store_query_duration_seconds_bucket{${sel}, pod="a", kind="select", outcome="ok", le="${le}"}`,
                  values,
                })),
              ],
              alert_rule_test: [
                fires('PhonebridgeMcpErrorRatioHigh', {}, '14.29% of MCP requests end in a relay error'),
                fires('PhonebridgeDeviceAuthRejections', {}, 'Phone socket authentications are being rejected (1/s)'),
                fires(
                  'PhonebridgeMcpLatencyP99High',
                  { method: 'tools/list' },
                  'p99 latency of MCP tools/list is 4.975s',
                ),
                fires(
                  'PhonebridgeNodeScrapeFailing',
                  { job: 'pb-phonebridge-admin', namespace: 'relay', pod: 'b', instance: '10.0.0.2:9464' },
                  'phonebridge node 10.0.0.2:9464 does not answer /metrics',
                ),
                fires(
                  'PhonebridgeEventLoopLagHigh',
                  { instance: '10.0.0.1:9464' },
                  'Event loop lag p99 on 10.0.0.1:9464 is 500ms',
                ),
                {
                  eval_time: '25m',
                  alertname: 'PhonebridgeEventLoopStalls',
                  exp_alerts: ['10.0.0.1:9464', '10.0.0.3:9464'].map((instance) => ({
                    exp_labels: { severity: 'warning', instance },
                    exp_annotations: {
                      summary: `The event loop of ${instance} stalled for more than 1s`,
                      description: String(
                        rules.find((r) => r.alert === 'PhonebridgeEventLoopStalls').annotations.description,
                      ),
                    },
                  })),
                },
                // Ten minutes after the stall its window has left the alert's range.
                { eval_time: '35m', alertname: 'PhonebridgeEventLoopStalls', exp_alerts: [] },
                fires('PhonebridgeDeviceRelayErrors', {}, 'Phone sockets are closed with 1011 (500m/s)'),
                fires(
                  'PhonebridgeDeviceIdleCloses',
                  {},
                  'Phone sockets go silent and are closed at their silence limit (100m/s)',
                ),
                fires(
                  'PhonebridgeStoreDown',
                  { instance: '10.0.0.1:9464' },
                  'phonebridge node 10.0.0.1:9464 cannot read its store (Postgres)',
                  'critical',
                ),
                fires(
                  'PhonebridgeRedisDown',
                  { instance: '10.0.0.2:9464' },
                  'phonebridge node 10.0.0.2:9464 cannot use Redis (the cluster bus)',
                  'critical',
                ),
                fires(
                  'PhonebridgeBusPublishSlow',
                  { instance: '10.0.0.1:9464' },
                  'Bus publishes from 10.0.0.1:9464 take 99.5ms at p99',
                ),
                fires('PhonebridgeStoreSlow', {}, 'Store queries take 2.485s at p99'),
                { eval_time: '30m', alertname: 'PhonebridgeTargetsDown', exp_alerts: [] },
                { eval_time: '30m', alertname: 'PhonebridgePairingFailures', exp_alerts: [] },
              ],
            },
          ],
        };
        const testFile = join(tmp, 'rules-test.yaml');
        writeFileSync(testFile, stringifyYaml(tests));
        const r = await run(PROMTOOL!, ['test', 'rules', testFile]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
      },
    );
  });

  it('ships the Grafana dashboard as a sidecar ConfigMap only when enabled, byte for byte the generated JSON', async () => {
    expect((await render()).some((d) => d.kind === 'ConfigMap')).toBe(false);
    const docs = await render({ ...BASE, grafana: { dashboard: { enabled: true } } });
    const cm = one(docs, 'ConfigMap', 'pb-phonebridge-dashboard');
    expect(cm.metadata.labels!.grafana_dashboard).toBe('1');
    expect((cm as any).metadata.namespace).toBe('relay');
    const json = String(cm.data['phonebridge.json']);
    expect(`${json}\n`).toBe(renderDashboardJson());
    expect(JSON.parse(json).uid).toBe('phonebridge');
    const moved = await render({
      ...BASE,
      grafana: {
        dashboard: {
          enabled: true,
          namespace: 'grafana',
          labels: { grafana_dashboard: '1', team: 'relay' },
          annotations: { grafana_folder: 'phonebridge' },
        },
      },
    });
    const cm2 = one(moved, 'ConfigMap');
    expect((cm2 as any).metadata.namespace).toBe('grafana');
    expect(cm2.metadata.labels).toMatchObject({ grafana_dashboard: '1', team: 'relay' });
    expect(cm2.metadata.annotations).toEqual({ grafana_folder: 'phonebridge' });
  });

  describe('NetworkPolicy', () => {
    it('opens the client port to all, the admin port to Prometheus only, egress to DNS, Postgres and Redis', async () => {
      expect((await render()).some((d) => d.kind === 'NetworkPolicy')).toBe(false);
      const docs = await render({ ...BASE, networkPolicy: { enabled: true } });
      const np = one(docs, 'NetworkPolicy');
      const c = gateway(docs);
      expect(np.apiVersion).toBe('networking.k8s.io/v1');
      expect(np.spec.podSelector.matchLabels).toEqual(one(docs, 'Deployment').spec.selector.matchLabels);
      expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
      const [client, admin] = np.spec.ingress as any[];
      expect(np.spec.ingress).toHaveLength(2);
      // Named ports resolve to the container's ports.
      expect(client.ports.map((p: any) => containerPort(c, p.port))).toEqual([8080]);
      expect(client.from).toBeUndefined();
      expect(admin.ports.map((p: any) => containerPort(c, p.port))).toEqual([9464]);
      expect(admin.from).toEqual([
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
          podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
        },
      ]);
      const egress = np.spec.egress as any[];
      expect(egress.map((r) => r.ports.map((p: any) => `${p.protocol}/${p.port}`))).toEqual([
        ['UDP/53', 'TCP/53'],
        ['TCP/5432'],
        ['TCP/6379'],
      ]);
      expect(egress[0].to[0].podSelector.matchLabels).toEqual({ 'k8s-app': 'kube-dns' });
      expect(egress[1].to).toBeUndefined();
    });

    it('takes configured peers, extra rules, and leaves egress open when asked', async () => {
      const ingressNs = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } };
      const pg = { podSelector: { matchLabels: { app: 'postgres' } } };
      const redis = { ipBlock: { cidr: '10.0.5.0/24' } };
      const otlp = { to: [{ podSelector: { matchLabels: { app: 'otel-collector' } } }], ports: [{ port: 4318 }] };
      const docs = await render({
        ...BASE,
        containerPorts: { client: 8000, admin: 9000 },
        networkPolicy: {
          enabled: true,
          clientPeers: [ingressNs],
          metrics: { namespaceSelector: { matchLabels: { team: 'obs' } }, podSelector: {} },
          egress: { postgres: { port: 6432, peers: [pg] }, redis: { peers: [redis] }, extraRules: [otlp] },
        },
      });
      const np = one(docs, 'NetworkPolicy');
      const c = gateway(docs);
      expect(np.spec.ingress[0].from).toEqual([ingressNs]);
      expect(containerPort(c, np.spec.ingress[0].ports[0].port)).toBe(8000);
      expect(containerPort(c, np.spec.ingress[1].ports[0].port)).toBe(9000);
      expect(np.spec.ingress[1].from).toEqual([
        { namespaceSelector: { matchLabels: { team: 'obs' } }, podSelector: {} },
      ]);
      expect(np.spec.egress[1]).toEqual({ ports: [{ port: 6432, protocol: 'TCP' }], to: [pg] });
      expect(np.spec.egress[2]).toEqual({ ports: [{ port: 6379, protocol: 'TCP' }], to: [redis] });
      expect(np.spec.egress[3]).toEqual(otlp);
      const open = one(
        await render({ ...BASE, networkPolicy: { enabled: true, egress: { enabled: false } } }),
        'NetworkPolicy',
      );
      expect(open.spec.policyTypes).toEqual(['Ingress']);
      expect(open.spec.egress).toBeUndefined();
    });
  });

  describe('values.schema.json', () => {
    const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));

    it('is draft-07 and describes every value of values.yaml', () => {
      expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
      const values = parseYaml(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Values;
      const missing: string[] = [];
      const walk = (obj: Values, node: any, prefix: string) => {
        for (const [k, v] of Object.entries(obj)) {
          const path = prefix ? `${prefix}.${k}` : k;
          const sub = node?.properties?.[k];
          if (!sub) {
            // Free-form Kubernetes objects (resources, selectors…) hold keys of their own.
            if (node?.type === 'object' && node.additionalProperties !== false && !node.properties) continue;
            missing.push(path);
            continue;
          }
          if (!sub.description && !sub.properties) missing.push(`${path} (no description)`);
          if (v && typeof v === 'object' && !Array.isArray(v)) walk(v as Values, sub, path);
        }
      };
      walk(values, schema, '');
      expect(missing).toEqual([]);
    });

    it('makes helm template and helm lint fail on a wrong type or an unknown key, naming the value', async () => {
      const cases: Array<[Values, RegExp]> = [
        [{ ...BASE, replicaCount: 'three' }, /replicaCount.*(got string, want integer|integer)/],
        [{ ...BASE, replicas: 3 }, /additional propert(y|ies) 'replicas'/],
        [{ ...BASE, networkPolicy: { enabled: 'yes' } }, /networkPolicy\/enabled/],
        [{ ...BASE, grafana: { dashboard: { enabled: true, labels: { grafana_dashboard: 1 } } } }, /grafana_dashboard/],
        [{ ...BASE, containerPorts: { client: 70000 } }, /containerPorts\/client/],
        [{ ...BASE, serviceMonitor: { interval: 'often' } }, /serviceMonitor\/interval/],
        [{ ...BASE, logLevel: 'loud' }, /logLevel/],
      ];
      for (const [values, message] of cases) {
        const r = await template(values);
        expect(r.code, JSON.stringify(values)).not.toBe(0);
        expect(r.stderr).toMatch(message);
        expect(r.stdout).toBe('');
      }
      const lint = await run(HELM, ['lint', '--strict', CHART, '-f', valuesFile({ ...BASE, replicaCount: 'three' })]);
      expect(lint.code).not.toBe(0);
      expect(lint.stdout + lint.stderr).toMatch(/replicaCount/);
    });
  });

  it('documents every value in the chart README', () => {
    const values = parseYaml(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Values;
    const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
    // Objects whose defaults are documented as a whole rather than key by key.
    const whole = new Set([
      'resources',
      'podSecurityContext',
      'securityContext',
      'updateStrategy',
      'grafana.dashboard.labels',
    ]);
    const paths: string[] = [];
    const walk = (obj: Values, prefix: string) => {
      for (const [k, v] of Object.entries(obj)) {
        const path = prefix ? `${prefix}.${k}` : k;
        if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0 && !whole.has(path))
          walk(v as Values, path);
        else paths.push(path);
      }
    };
    walk(values, '');
    expect(paths.length).toBeGreaterThan(40);
    const missing = paths.filter((p) => !readme.includes(`\`${p}\``));
    expect(missing, 'values missing from helm/phonebridge/README.md').toEqual([]);
  });
});
