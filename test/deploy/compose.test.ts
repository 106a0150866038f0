// deploy/compose.yaml, checked as far as this machine allows (no Docker daemon here): the file
// parses, every file it mounts or builds from exists, the nodes' environment is what the relay's
// own parser accepts and points at the compose services, Prometheus scrapes exactly the nodes'
// admin ports (and `promtool check config` accepts it), nginx balances over their client ports,
// the collector's pipelines use only components it defines, and — when docker-compose or the
// compose plugin is installed — `config -q` validates the file against the Compose schema.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { parseRelayConfig } from '../../src/config.ts';
import { parseRedisUrl } from '../../src/bus/redis/topology.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DEPLOY = join(ROOT, 'deploy');
const COMPOSE = join(DEPLOY, 'compose.yaml');
const PROMTOOL = [process.env.PROMTOOL, '/usr/bin/promtool'].find((p): p is string => !!p && existsSync(p));
const DOCKER_COMPOSE = ['/usr/bin/docker-compose', '/usr/local/bin/docker-compose'].find((p) => existsSync(p));
const NODES = ['node-1', 'node-2', 'node-3'];

type Service = {
  image?: string;
  build?: { context: string; dockerfile: string };
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }> | string[];
  ports?: string[];
  healthcheck?: { test: string[] };
};
const compose = parseYaml(readFileSync(COMPOSE, 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
};
const services = compose.services;

function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((done) =>
    execFile(cmd, args, { timeout: 60_000, cwd: ROOT }, (err, stdout, stderr) =>
      done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    ),
  );
}

/** A bind mount's host path (relative to deploy/), or undefined for a named volume. */
function hostPath(volume: string): string | undefined {
  const src = volume.split(':')[0];
  return src.startsWith('.') || src.startsWith('/') ? resolve(DEPLOY, src) : undefined;
}

describe('deploy/compose.yaml', () => {
  it('has three identical gateway nodes, Redis, Postgres, Prometheus, an OpenTelemetry Collector', () => {
    expect(Object.keys(services).sort()).toEqual(
      ['grafana', 'lb', ...NODES, 'otel-collector', 'postgres', 'prometheus', 'redis'].sort(),
    );
    for (const name of NODES) {
      const s = services[name];
      expect(s.build).toEqual({ context: '..', dockerfile: 'deploy/Dockerfile' });
      expect(s.depends_on).toEqual({
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
      });
      // Only the load balancer is published; admin ports stay inside the compose network.
      expect(s.ports).toBeUndefined();
      expect(s.healthcheck?.test.join(' ')).toContain('/readyz');
    }
  });

  it('mounts and builds only files that exist', () => {
    const missing: string[] = [];
    for (const [name, s] of Object.entries(services)) {
      for (const v of s.volumes ?? []) {
        const path = hostPath(v);
        if (path === undefined) {
          expect(compose.volumes, `named volume of ${name}`).toHaveProperty(v.split(':')[0]);
        } else if (!existsSync(path)) missing.push(`${name}: ${v}`);
      }
      if (s.build) {
        const context = resolve(DEPLOY, s.build.context);
        if (!existsSync(join(context, s.build.dockerfile))) missing.push(`${name}: build ${s.build.dockerfile}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("gives each node an environment the relay's parser accepts, pointing at the compose services", () => {
    const pg = services.postgres.environment!;
    const ids = new Set<string>();
    for (const name of NODES) {
      const env = services[name].environment!;
      for (const k of Object.keys(env)) expect(k).toMatch(/^(PHONEBRIDGE|OTEL)_[A-Z_]+$/);
      const config = parseRelayConfig([], env);
      expect(config).toMatchObject({
        host: '0.0.0.0',
        port: 8080,
        adminPort: 9464,
        publicUrl: 'http://localhost:8080',
        publicUrlExplicit: true,
        trustProxy: true,
        nodeId: name,
      });
      ids.add(config.nodeId);
      const db = new URL(config.databaseUrl!);
      expect([db.hostname, db.port, db.username, db.password, db.pathname]).toEqual([
        'postgres',
        '5432',
        pg.POSTGRES_USER,
        pg.POSTGRES_PASSWORD,
        `/${pg.POSTGRES_DB}`,
      ]);
      expect(new URL(config.redisUrl!).hostname).toBe('redis');
      const otlp = new URL(env.OTEL_EXPORTER_OTLP_ENDPOINT);
      expect(otlp.hostname).toBe('otel-collector');
      expect(otlp.port).toBe('4318');
    }
    expect(ids.size).toBe(NODES.length);
  });

  it("balances over the nodes' client ports with WebSocket upgrades, no buffering and long timeouts", () => {
    const conf = readFileSync(join(DEPLOY, 'compose', 'nginx.conf'), 'utf8').replace(/#.*$/gm, '');
    const upstreams = [...conf.matchAll(/^\s*server\s+([\w.-]+:\d+)/gm)].map((m) => m[1]);
    expect(upstreams).toEqual(NODES.map((n) => `${n}:8080`));
    expect(conf).toMatch(/proxy_set_header Upgrade \$http_upgrade;/);
    expect(conf).toMatch(/proxy_buffering off;/);
    expect(conf).toMatch(/proxy_read_timeout 3600s;/);
    expect(conf).not.toMatch(/ip_hash|sticky|hash \$/);
    expect(services.lb.ports).toEqual(['8080:8080']);
  });

  it("scrapes every node's admin port", () => {
    const prom = parseYaml(readFileSync(join(DEPLOY, 'compose', 'prometheus.yml'), 'utf8'));
    const job = prom.scrape_configs.find((j: any) => j.job_name === 'phonebridge');
    expect(job.static_configs.flatMap((c: any) => c.targets)).toEqual(NODES.map((n) => `${n}:9464`));
    const collector = prom.scrape_configs.find((j: any) => j.job_name === 'otel-collector');
    expect(collector.static_configs[0].targets).toEqual(['otel-collector:8888']);
  });

  it.skipIf(!PROMTOOL)('has a Prometheus config that promtool check config accepts', async () => {
    const r = await run(PROMTOOL!, ['check', 'config', join(DEPLOY, 'compose', 'prometheus.yml')]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/SUCCESS/);
  });

  it('runs collector pipelines made only of components it defines, listening where the nodes send', () => {
    const col = parseYaml(readFileSync(join(DEPLOY, 'compose', 'otel-collector.yaml'), 'utf8'));
    const pipelines = Object.entries<Record<string, string[]>>(col.service.pipelines);
    expect(pipelines.map(([name]) => name).sort()).toEqual(['logs', 'metrics', 'traces']);
    for (const [name, p] of pipelines) {
      for (const kind of ['receivers', 'processors', 'exporters']) {
        for (const c of p[kind] ?? []) expect(col[kind], `${name}.${kind}: ${c}`).toHaveProperty(c);
      }
    }
    for (const e of col.service.extensions) expect(col.extensions).toHaveProperty(e);
    expect(col.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    expect(col.service.telemetry.metrics.readers[0].pull.exporter.prometheus.port).toBe(8888);
  });

  it('provisions Grafana with the compose Prometheus and the generated dashboard', () => {
    const g = services.grafana;
    const dash = g.volumes!.find((v) => v.includes('phonebridge.json'))!;
    expect(hostPath(dash)).toBe(join(DEPLOY, 'grafana', 'phonebridge.json'));
    const provisioning = join(DEPLOY, 'compose', 'grafana', 'provisioning');
    const ds = parseYaml(readFileSync(join(provisioning, 'datasources', 'prometheus.yaml'), 'utf8'));
    expect(ds.datasources[0]).toMatchObject({ type: 'prometheus', url: 'http://prometheus:9090', isDefault: true });
    const boards = parseYaml(readFileSync(join(provisioning, 'dashboards', 'phonebridge.yaml'), 'utf8'));
    const mountedAt = dash.split(':')[1];
    expect(mountedAt.startsWith(`${boards.providers[0].options.path}/`)).toBe(true);
  });

  // docker-compose (Debian package docker-compose) validates without a daemon.
  it.skipIf(!DOCKER_COMPOSE)('passes docker-compose config (the Compose schema)', async () => {
    const r = await run(DOCKER_COMPOSE!, ['-f', COMPOSE, 'config', '-q']);
    expect(r.code, r.out).toBe(0);
  });
});

describe('the Redis topology overrides (compose.sentinel.yaml, compose.cluster.yaml)', () => {
  const cases: Array<[string, 'sentinel' | 'cluster', string[]]> = [
    ['compose.sentinel.yaml', 'sentinel', ['sentinel-1', 'sentinel-2', 'sentinel-3']],
    ['compose.cluster.yaml', 'cluster', ['redis-c1', 'redis-c2', 'redis-c3']],
  ];
  it.each(cases)('%s points every node at the topology it starts, as the relay parses it', (file, kind, hosts) => {
    const o = parseYaml(readFileSync(join(DEPLOY, file), 'utf8'), { merge: true }) as {
      services: Record<string, Service>;
    };
    for (const name of NODES) {
      // The override's environment merges over the base file's: the result is what a node gets.
      const env = { ...services[name].environment, ...o.services[name].environment } as Record<string, string>;
      const url = parseRelayConfig([], env).redisUrl!;
      const t = parseRedisUrl(url);
      expect(t.kind).toBe(kind);
      const named = t.kind === 'sentinel' ? t.sentinels : t.kind === 'cluster' ? t.nodes : [];
      expect(named.map((h) => h.host)).toEqual(hosts);
      for (const h of hosts) expect(o.services[h], `service ${h}`).toBeDefined();
    }
    if (kind === 'cluster') {
      const init = o.services['redis-cluster-init'] as Service & { command: string[] };
      expect(init.command.join(' ')).toMatch(/--cluster create( redis-c\d:6379){6} --cluster-replicas 1 --cluster-yes/);
      for (const n of NODES)
        expect((o.services[n].depends_on as Record<string, { condition: string }>)['redis-cluster-init']).toEqual({
          condition: 'service_completed_successfully',
        });
    }
  });
});
