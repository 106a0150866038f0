// `phonebridge serve` settings: each flag `--some-flag` mirrors env `PHONEBRIDGE_SOME_FLAG`;
// a flag wins over the environment, the environment over the default.
import process from 'node:process';
import { parseArgs } from 'node:util';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { parseCidr } from './gateway/client-address.ts';
import { parseRedisUrl, RedisUrlError } from './bus/redis/topology.ts';
import { redactDatabaseUrl } from './store/database/postgres.ts';

/** Settings serve cannot start with (docs/decisions/0032-listening-defaults.md); the CLI exits 2. */
export class ConfigError extends Error {}

export interface RelayConfig {
  port: number;
  host: string;
  adminPort: number;
  /** Where /metrics, /healthz and /readyz listen: loopback unless set (a pod sets its own address). */
  adminHost: string;
  publicUrl: string;
  /** false when publicUrl was derived from --host/--port (then a port 0 is filled in after listen). */
  publicUrlExplicit: boolean;
  /** host[:port] of publicUrl: what device signatures bind to and /pair returns as relay_host. */
  relayHost: string;
  dataDir: string;
  databaseUrl?: string;
  /** One Redis, Sentinel or Redis Cluster, by scheme (src/bus/redis/topology.ts). */
  redisUrl?: string;
  /** Namespace of every Redis key and channel (default `pb:`); lets clusters share one Redis. */
  redisPrefix?: string;
  nodeId: string;
  hosted: boolean;
  trustProxy: boolean;
  /** With trustProxy: proxies in front that each append to X-Forwarded-For (default 1). */
  trustedHops: number;
  /** With trustProxy: CIDRs of those proxies; when set, hops are recognised by address. */
  trustedProxies: string[];
  tlsCert?: string;
  tlsKey?: string;
  allowedOrigins: string[];
  /** Per forwarded request (docs/PROTOCOL.md: 30 s). Lowered in tests. */
  requestTimeoutMs: number;
  /** Silence after which a phone socket is closed (docs/PROTOCOL.md: 25 min). */
  deviceIdleMs: number;
  /** Idle MCP session expiry (docs/PROTOCOL.md: 24 h). */
  sessionIdleMs: number;
  /** How often the node reads the store's invalidation journal (CLI changes). */
  controlPollMs: number;
  /** SIGTERM: how long in-flight requests may take to finish. */
  drainMs: number;
  logLevel: string;
  /** Drain and exit when stdin (a pipe from the parent process) closes: no orphaned nodes. */
  exitWithParent: boolean;
  /** Client requests in flight per phone socket before new ones get device_busy. */
  maxInFlight: number;
  /** Hosted mode: sign-in mail goes out over this SMTP URL; without it the link is logged (development). */
  smtpUrl?: string;
  mailFrom: string;
  /** Budgets per credential and per node (docs/decisions/0040-credential-budgets.md). */
  budgets: Budgets;
  /** /api/v1 requests per fleet key per minute across the cluster; undefined: the feature's default (src/fleet). */
  apiRequestsPerMinute?: number;
}

/** What one credential (API key) may hold, and what a node holds for everyone together. */
export interface Budgets {
  /** A key's share of one phone's --max-in-flight (default: half of it, at least 64). */
  maxInFlightPerKey: number;
  /** JSON-RPC messages in one batch. */
  maxBatch: number;
  /** Concurrent wait_for_events calls per key. */
  maxWaitsPerKey: number;
  /** Live sessions per key; a new one evicts the least recently used. */
  maxSessionsPerKey: number;
  /** initialize per key per minute, and per client address per minute (shared by all nodes). */
  initializePerMinute: number;
  initializePerMinutePerAddress: number;
  /** GET streams per session and per key on a node; a new one closes the oldest. */
  maxStreamsPerSession: number;
  maxStreamsPerKey: number;
  /** Replay-buffer bytes a node holds in all, and for one key's sessions (local bus). */
  replayNodeBytes: number;
  replayKeyBytes: number;
  /** Abandoned calls kept running per phone socket (docs/decisions/0042-abandoned-calls.md). */
  maxOrphans: number;
}

const FLAGS = {
  port: { type: 'string' },
  host: { type: 'string' },
  'admin-port': { type: 'string' },
  'admin-host': { type: 'string' },
  'public-url': { type: 'string' },
  'data-dir': { type: 'string' },
  'database-url': { type: 'string' },
  'redis-url': { type: 'string' },
  'redis-prefix': { type: 'string' },
  'node-id': { type: 'string' },
  hosted: { type: 'boolean' },
  'trust-proxy': { type: 'boolean' },
  'trusted-hops': { type: 'string' },
  'trusted-proxies': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  'allowed-origins': { type: 'string' },
  'request-timeout-ms': { type: 'string' },
  'device-idle-ms': { type: 'string' },
  'session-idle-ms': { type: 'string' },
  'drain-ms': { type: 'string' },
  'control-poll-ms': { type: 'string' },
  'log-level': { type: 'string' },
  'exit-with-parent': { type: 'boolean' },
  'max-in-flight': { type: 'string' },
  'smtp-url': { type: 'string' },
  'mail-from': { type: 'string' },
  'max-in-flight-per-key': { type: 'string' },
  'max-batch': { type: 'string' },
  'max-waits-per-key': { type: 'string' },
  'max-sessions-per-key': { type: 'string' },
  'initialize-per-minute': { type: 'string' },
  'initialize-per-minute-per-address': { type: 'string' },
  'max-streams-per-session': { type: 'string' },
  'max-streams-per-key': { type: 'string' },
  'replay-node-bytes': { type: 'string' },
  'replay-key-bytes': { type: 'string' },
  'max-orphans': { type: 'string' },
  'api-requests-per-minute': { type: 'string' },
} as const;

export type FlagName = keyof typeof FLAGS;

/** Every `serve` flag, in the order above (what `phonebridge serve --help` lists). */
export const SERVE_FLAGS = Object.entries(FLAGS).map(([name, o]) => ({ name, switch: o.type === 'boolean' }));

function envName(flag: string): string {
  return `PHONEBRIDGE_${flag.toUpperCase().replace(/-/g, '_')}`;
}

/**
 * A plain decimal integer (digits only, at most Number.MAX_SAFE_INTEGER), else undefined: Number()
 * would read "0x50" as 80, "1e3" as 1000 and "" or " " as 0. Every number serve and the CLI take.
 */
export function decimalInteger(raw: string): number | undefined {
  return /^\d+$/.test(raw) && Number.isSafeInteger(Number(raw)) ? Number(raw) : undefined;
}

function intValue(name: string, raw: string | undefined, dflt: number): number {
  if (raw === undefined || raw === '') return dflt;
  const n = decimalInteger(raw);
  if (n === undefined) throw new ConfigError(`--${name} must be a non-negative integer, got "${raw}"`);
  return n;
}

/** pino's levels; pino throws on any other in its own words ("default level:… must be included in custom levels"). */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** The longest delay a Node timer keeps; setTimeout/setInterval run a longer one after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function msValue(name: string, raw: string | undefined, dflt: number, min = 0): number {
  const n = intValue(name, raw, dflt);
  if (n < min) throw new ConfigError(`--${name} must be at least ${min} ms, got "${raw}"`);
  if (n > MAX_TIMER_MS)
    throw new ConfigError(`--${name} must be at most ${MAX_TIMER_MS} ms (about 24.8 days), got "${raw}"`);
  return n;
}

/** uWebSockets.js takes a port modulo 65536 (99999 listens on 34463): refuse what is not a port. */
function portValue(name: string, raw: string | undefined, dflt: number): number {
  const n = intValue(name, raw, dflt);
  if (n > 65535) throw new ConfigError(`--${name} must be a port number (0 to 65535), got "${raw}"`);
  return n;
}

/** How a switch's environment twin may say on and off (any case); anything else stops the start. */
const ON = ['true', '1', 'yes'];
const OFF = ['false', '0', 'no'];

function boolValue(name: FlagName, raw: string | boolean | undefined): boolean {
  if (typeof raw === 'boolean') return raw;
  if (raw === undefined || raw === '') return false;
  const v = raw.toLowerCase();
  if (ON.includes(v)) return true;
  if (OFF.includes(v)) return false;
  throw new ConfigError(`${envName(name)} (--${name}) must be true or false (1/0, yes/no), got "${raw}"`);
}

/**
 * --smtp-url must be an smtp:// or smtps:// URL with a host: nodemailer takes anything else as
 * options it cannot use and fails later in words that print the URL, password included.
 */
function smtpUrlValue(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (url && (url.protocol === 'smtp:' || url.protocol === 'smtps:') && url.hostname !== '') return raw;
  // Only a URL with a host is shown (its password masked); any other text may hold a secret anywhere.
  const shown = url && url.host !== '' ? `, got ${redactDatabaseUrl(url.href)}` : '';
  throw new ConfigError(`--smtp-url must be an smtp://[user:password@]host[:port] or smtps://… URL${shown}`);
}

/**
 * --api-requests-per-minute, or its twin PHONEBRIDGE_API_REQUESTS_PER_MINUTE: /api/v1 requests
 * per fleet key per minute across the cluster (src/fleet). Absent or empty → the feature's
 * default; otherwise a positive decimal integer, else the start stops (exit 2) naming where the
 * value came from. The flag wins over the environment, as every serve flag does.
 */
export function apiRequestsPerMinute(env: NodeJS.ProcessEnv = process.env, flag?: string): number | undefined {
  const fromFlag = flag !== undefined;
  const raw = flag ?? env.PHONEBRIDGE_API_REQUESTS_PER_MINUTE;
  if (raw === undefined || raw === '') return undefined;
  const n = decimalInteger(raw);
  if (n === undefined || n < 1)
    throw new ConfigError(
      `${fromFlag ? '--api-requests-per-minute' : 'PHONEBRIDGE_API_REQUESTS_PER_MINUTE'} must be a positive decimal integer, got "${raw}"`,
    );
  return n;
}

/** Flags shared by serve and every CLI command that touches the database. */
export function storeOptions(values: { 'data-dir'?: string; 'database-url'?: string }, env = process.env) {
  return {
    dataDir: values['data-dir'] ?? env.PHONEBRIDGE_DATA_DIR ?? './.phonebridge',
    databaseUrl: values['database-url'] ?? env.PHONEBRIDGE_DATABASE_URL ?? undefined,
  };
}

/**
 * --public-url as serve takes it: an http(s) URL without its trailing slashes. serve leaves that
 * form in relay.json; `pair` and `enroll create` read theirs through this too, so the two compare
 * equal and the QR keeps serve's TLS pin. Throws ConfigError.
 */
export function publicUrlValue(raw: string): { publicUrl: string; parsed: URL } {
  const publicUrl = raw.replace(/\/+$/, '');
  let parsed: URL;
  try {
    parsed = new URL(publicUrl);
  } catch {
    throw new ConfigError(`--public-url is not a URL: "${publicUrl}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new ConfigError('--public-url must be http(s)');
  return { publicUrl, parsed };
}

/** 127.0.0.0/8, ::1 and localhost: reachable from this machine only. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === '::ffff:127.0.0.1';
}

export function parseRelayConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): RelayConfig {
  const { values } = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false });
  const get = (f: FlagName): string | boolean | undefined =>
    (values as Record<string, string | boolean | undefined>)[f] ?? env[envName(f)];
  const str = (f: FlagName) => {
    const v = get(f);
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  const port = portValue('port', str('port'), 8080);
  const maxInFlight = Math.max(1, intValue('max-in-flight', str('max-in-flight'), 2_048));
  const host = str('host') ?? '127.0.0.1';
  if (!isLoopback(host) && str('public-url') === undefined)
    throw new ConfigError(
      `--host ${host} is not a loopback address: set --public-url (PHONEBRIDGE_PUBLIC_URL) to the URL phones and clients use. ` +
        `Phones sign it and Origin checks compare with it, so it cannot be derived from ${host}.`,
    );
  const trustedHops = intValue('trusted-hops', str('trusted-hops'), 1);
  if (trustedHops < 1)
    throw new ConfigError('--trusted-hops must be at least 1 (without a proxy, leave --trust-proxy off)');
  const trustedProxies = (str('trusted-proxies') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const c of trustedProxies)
    if (!parseCidr(c))
      throw new ConfigError(`--trusted-proxies: "${c}" is not an address or CIDR (10.0.0.0/8, fd00::/8)`);
  const tlsCert = str('tls-cert');
  const tlsKey = str('tls-key');
  if (!!tlsCert !== !!tlsKey) throw new ConfigError('--tls-cert and --tls-key go together');
  const scheme = tlsCert ? 'https' : 'http';
  const { publicUrl, parsed } = publicUrlValue(
    str('public-url') ?? `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`,
  );
  const { dataDir, databaseUrl } = storeOptions(values, env);
  const redisUrl = str('redis-url');
  if (redisUrl !== undefined)
    try {
      parseRedisUrl(redisUrl);
    } catch (err) {
      if (err instanceof RedisUrlError) throw new ConfigError(err.message);
      throw err;
    }
  const logLevel = str('log-level') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel))
    throw new ConfigError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  return {
    port,
    host,
    adminPort: portValue('admin-port', str('admin-port'), 9464),
    adminHost: str('admin-host') ?? '127.0.0.1',
    publicUrl,
    publicUrlExplicit: str('public-url') !== undefined,
    relayHost: parsed.host,
    dataDir,
    databaseUrl,
    redisUrl,
    redisPrefix: str('redis-prefix'),
    nodeId: str('node-id') ?? `${hostname()}-${randomBytes(3).toString('hex')}`,
    hosted: boolValue('hosted', get('hosted')),
    trustProxy: boolValue('trust-proxy', get('trust-proxy')),
    trustedHops,
    trustedProxies,
    tlsCert,
    tlsKey,
    allowedOrigins: (str('allowed-origins') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    requestTimeoutMs: msValue('request-timeout-ms', str('request-timeout-ms'), 30_000, 1),
    deviceIdleMs: msValue('device-idle-ms', str('device-idle-ms'), 25 * 60_000, 1),
    sessionIdleMs: msValue('session-idle-ms', str('session-idle-ms'), 24 * 3600_000, 1),
    drainMs: msValue('drain-ms', str('drain-ms'), 25_000),
    controlPollMs: Math.max(50, msValue('control-poll-ms', str('control-poll-ms'), 250)),
    logLevel,
    exitWithParent: boolValue('exit-with-parent', get('exit-with-parent')),
    maxInFlight,
    smtpUrl: smtpUrlValue(str('smtp-url')),
    mailFrom: str('mail-from') ?? `phonebridge <no-reply@${parsed.hostname}>`,
    budgets: parseBudgets(str, maxInFlight),
    apiRequestsPerMinute: apiRequestsPerMinute(env, values['api-requests-per-minute']),
  };
}

function parseBudgets(str: (f: FlagName) => string | undefined, maxInFlight: number): Budgets {
  const int = (f: FlagName, dflt: number, min = 1) => Math.max(min, intValue(f, str(f), dflt));
  const replayNodeBytes = int('replay-node-bytes', 64 * 1024 * 1024, 0);
  return {
    maxInFlightPerKey: Math.min(maxInFlight, int('max-in-flight-per-key', Math.max(64, Math.floor(maxInFlight / 2)))),
    maxBatch: int('max-batch', 128),
    maxWaitsPerKey: int('max-waits-per-key', 4),
    maxSessionsPerKey: int('max-sessions-per-key', 256),
    initializePerMinute: int('initialize-per-minute', 120),
    initializePerMinutePerAddress: int('initialize-per-minute-per-address', 600),
    maxStreamsPerSession: int('max-streams-per-session', 8),
    maxStreamsPerKey: int('max-streams-per-key', 64),
    replayNodeBytes,
    replayKeyBytes: Math.min(replayNodeBytes, int('replay-key-bytes', 8 * 1024 * 1024, 0)),
    maxOrphans: int('max-orphans', 256, 0),
  };
}
