// Which Redis the bus talks to, read from one URL (docs/decisions/0150-redis-topologies.md):
//
//   redis://[[user]:password@]host[:port][/db]          one Redis (rediss:// for TLS)
//   redis+sentinel://[[user]:password@]h1:26379,h2:26379/<master-name>[/db]
//                                                       Sentinel (rediss+sentinel:// for TLS)
//   redis+cluster://[[user]:password@]h1:6379,h2:6379   Redis Cluster (rediss+cluster:// for TLS)
//
// Pure: parsing and describing only. The connections are made in connector.ts.

/** A --redis-url that names no usable topology. The message says what is wrong; never the password. */
export class RedisUrlError extends Error {}

export interface HostPort {
  host: string;
  port: number;
}

interface Auth {
  username?: string;
  password?: string;
  tls: boolean;
}

export type Topology =
  | ({ kind: 'single'; url: string } & Auth)
  | ({ kind: 'sentinel'; sentinels: HostPort[]; masterName: string; db: number; sentinelPassword?: string } & Auth)
  | ({ kind: 'cluster'; nodes: HostPort[] } & Auth);

const SCHEMES: Record<string, { kind: Topology['kind']; tls: boolean; port: number }> = {
  'redis:': { kind: 'single', tls: false, port: 6379 },
  'rediss:': { kind: 'single', tls: true, port: 6379 },
  'redis+sentinel:': { kind: 'sentinel', tls: false, port: 26379 },
  'rediss+sentinel:': { kind: 'sentinel', tls: true, port: 26379 },
  'redis+cluster:': { kind: 'cluster', tls: false, port: 6379 },
  'rediss+cluster:': { kind: 'cluster', tls: true, port: 6379 },
};

const SCHEME_LIST = 'redis://, rediss://, redis+sentinel://, rediss+sentinel://, redis+cluster://, rediss+cluster://';

export function parseRedisUrl(raw: string): Topology {
  const m = /^([a-z+]+:)\/\/(?:([^@/]*)@)?([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/i.exec(raw.trim());
  const scheme = m && SCHEMES[m[1].toLowerCase()];
  if (!m || !scheme) throw new RedisUrlError(`--redis-url must start with one of ${SCHEME_LIST}`);
  const [, , userinfo, hostList, path = '', query = ''] = m;
  const auth: Auth = { tls: scheme.tls, ...parseUserinfo(userinfo) };
  if (hostList === '') throw new RedisUrlError(`--redis-url names no host`);
  const hosts = hostList.split(',').map((h) => parseHostPort(h, scheme.port));
  const params = new URLSearchParams(query);
  const segments = path.split('/').filter(Boolean);

  if (scheme.kind === 'single') {
    if (hosts.length > 1)
      throw new RedisUrlError(
        '--redis-url redis:// names one host; use redis+sentinel:// or redis+cluster:// for several',
      );
    if (segments.length > 1 || (segments[0] !== undefined && !isDb(segments[0])))
      throw new RedisUrlError(`--redis-url: "${path}" is not a database number (/0 … /15)`);
    return { kind: 'single', url: raw.trim(), ...auth };
  }
  if (scheme.kind === 'sentinel') {
    const [masterName, db = '0', ...rest] = segments.map(decodeURIComponent);
    if (!masterName)
      throw new RedisUrlError(
        '--redis-url redis+sentinel:// needs the master name: redis+sentinel://h1:26379,h2:26379/mymaster',
      );
    if (rest.length > 0 || !isDb(db))
      throw new RedisUrlError(
        `--redis-url: "${db}${rest.length ? '/' + rest.join('/') : ''}" is not a database number (/0 … /15)`,
      );
    const sentinelPassword = params.get('sentinelPassword') ?? undefined;
    return { kind: 'sentinel', sentinels: hosts, masterName, db: Number(db), sentinelPassword, ...auth };
  }
  if (segments.length > 0)
    throw new RedisUrlError('--redis-url redis+cluster:// takes no database (Redis Cluster has only database 0)');
  return { kind: 'cluster', nodes: hosts, ...auth };
}

function isDb(s: string): boolean {
  return /^\d{1,2}$/.test(s) && Number(s) <= 15;
}

function parseUserinfo(userinfo: string | undefined): { username?: string; password?: string } {
  if (userinfo === undefined || userinfo === '') return {};
  const colon = userinfo.indexOf(':');
  const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
  const pass = colon < 0 ? undefined : userinfo.slice(colon + 1);
  try {
    return {
      username: user ? decodeURIComponent(user) : undefined,
      password: pass ? decodeURIComponent(pass) : undefined,
    };
  } catch {
    throw new RedisUrlError('--redis-url: the user or password is not URL-encoded properly');
  }
}

function parseHostPort(s: string, dflt: number): HostPort {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(s.trim());
  const port = m?.[2] === undefined ? dflt : Number(m[2]);
  if (!m || port < 1 || port > 65535) throw new RedisUrlError(`--redis-url: "${s}" is not host[:port]`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port };
}

/** The topology in one line, for logs and errors: hosts and names, never a password. */
export function describeTopology(t: Topology): string {
  const hp = (h: HostPort) => (h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`);
  const tls = t.tls ? ' over TLS' : '';
  if (t.kind === 'single') {
    const u = parseSingle(t.url);
    return `Redis at ${u}${tls}`;
  }
  if (t.kind === 'sentinel')
    return `Sentinel master "${t.masterName}" (db ${t.db}) via sentinels ${t.sentinels.map(hp).join(', ')}${tls}`;
  return `Redis Cluster via ${t.nodes.map(hp).join(', ')}${tls}`;
}

function parseSingle(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || '127.0.0.1'}:${u.port || 6379}${u.pathname && u.pathname !== '/' ? u.pathname : ''}`;
  } catch {
    return '(unparsable URL)';
  }
}
