// The relays a scenario loads: real relay processes (loadtest/fleet-relay.ts children, so a
// node can be killed for real and its memory is its own), on a fresh Postgres database when
// one answers on 127.0.0.1 (else the embedded store in a temp dir), and for several nodes
// Redis with a fresh key prefix. Everything is removed again by `dispose`.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startRelayChild, type RelayChild } from '../fleet-relay.ts';
import { UsageError, type CommonOptions } from './options.ts';

export const PG_ADMIN_URL = process.env.PHONEBRIDGE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * The one Redis (any topology: redis://, rediss://, redis+sentinel://, redis+cluster://) a
 * scenario's nodes share: --redis-url, else REDIS_URL. For scenarios whose nodes share one bus
 * (fleet, faults, upgrade): several --redis-url are a usage error (exit 64), not a silent pick.
 */
export function oneRedisUrl(opts: CommonOptions): string {
  if (opts.redisUrls.length > 1)
    throw new UsageError(
      `${opts.scenario} takes one --redis-url (its nodes share one bus), got ${opts.redisUrls.length}`,
    );
  return opts.redisUrls[0] ?? REDIS_URL;
}

/**
 * Relay flags for scenarios whose clients, all on one address, open sessions faster than the
 * relay's default initialize budgets (a minute's worth per key and per address) allow on a
 * quick machine: they measure churn or memory, not those limits
 * (test/relay/sessions-streams.test.ts does).
 */
export const SESSION_CHURN_FLAGS = [
  '--initialize-per-minute',
  '1000000',
  '--initialize-per-minute-per-address',
  '1000000',
];

export interface StoreChoice {
  kind: 'postgres' | 'embedded';
  flags: string[];
  drop(): Promise<void>;
}

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 2000 });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** A fresh Postgres database, or the embedded store when Postgres is not reachable (or `embedded`). */
export async function chooseStore(embedded = false): Promise<StoreChoice> {
  if (!embedded) {
    const name = `pb_load_${randomBytes(5).toString('hex')}`;
    try {
      await admin(`create database ${name}`);
      const url = new URL(PG_ADMIN_URL);
      url.pathname = `/${name}`;
      return {
        kind: 'postgres',
        flags: ['--database-url', url.toString()],
        drop: () => admin(`drop database if exists ${name} with (force)`),
      };
    } catch {
      // no Postgres here: fall through
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'pb-load-'));
  return {
    kind: 'embedded',
    flags: ['--data-dir', dir],
    drop: () => Promise.resolve(rmSync(dir, { recursive: true, force: true })),
  };
}

export interface Relays {
  nodes: RelayChild[];
  store: StoreChoice;
  /** Flags of node i. */
  flagsOf(i: number): string[];
  /**
   * Starts node i again (same store and bus) on a new port: the old one stays in TIME_WAIT
   * after a kill with phones on it, and uWS does not listen over that. Callers re-point
   * their phones, as a load balancer in front of the node would.
   */
  restart(i: number): Promise<RelayChild>;
  dispose(): Promise<void>;
}

export async function startRelays(
  opts: { nodes?: number; flags?: string[]; embedded?: boolean; redis?: boolean; redisUrl?: string } = {},
): Promise<Relays> {
  const count = opts.nodes ?? 1;
  const store = await chooseStore(opts.embedded);
  const prefix = `pbload:${randomBytes(4).toString('hex')}:`;
  const redisUrl = opts.redisUrl ?? REDIS_URL;
  const bus = count > 1 || opts.redis ? ['--redis-url', redisUrl, '--redis-prefix', prefix] : [];
  const flags: string[][] = [];
  const nodes: RelayChild[] = [];
  // Extra node flags for the relay children only (not the load generator), e.g. to profile them:
  // PHONEBRIDGE_LOADTEST_RELAY_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'. A node stopped
  // gracefully writes its profile; one killed with SIGKILL (storm) writes none.
  const extra = (process.env.PHONEBRIDGE_LOADTEST_RELAY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const start = (f: string[]) => startRelayChild(f, { execArgv: ['--expose-gc', ...extra] });
  try {
    for (let i = 0; i < count; i++) {
      const f = ['--port', '0', '--node-id', `load-${i}`, ...store.flags, ...bus, ...(opts.flags ?? [])];
      const node = await start(f);
      flags.push(f);
      nodes.push(node);
    }
  } catch (err) {
    await Promise.all(nodes.map((n) => n.kill()));
    await store.drop().catch(() => {});
    throw err;
  }
  return {
    nodes,
    store,
    flagsOf: (i) => flags[i],
    async restart(i) {
      nodes[i] = await start(flags[i]);
      return nodes[i];
    },
    async dispose() {
      await Promise.all(nodes.map((n) => n.stop().catch(() => n.kill())));
      if (bus.length) {
        const { redisCounter } = await import('./redis-commands.ts');
        const r = await redisCounter(redisUrl);
        try {
          await r.dropPrefix(prefix);
        } finally {
          r.close();
        }
      }
      await store.drop().catch(() => {});
    },
  };
}

/** What a scenario may ask of a relay it did not start (--target): phones and keys, no more. */
export type TargetNode = Pick<RelayChild, 'url' | 'mcpUrl' | 'devices' | 'keys'>;

/**
 * A running relay or cluster front (--target URL). Phones and keys are created in its store,
 * as `phonebridge pair` and `keys create` do, so the store must be reachable from here:
 * PHONEBRIDGE_DATABASE_URL (or PHONEBRIDGE_DATA_DIR) as for the relay's own CLI.
 */
export async function targetNode(url: string): Promise<{ node: TargetNode; close(): Promise<void> }> {
  const databaseUrl = process.env.PHONEBRIDGE_DATABASE_URL;
  const dataDir = process.env.PHONEBRIDGE_DATA_DIR;
  if (!databaseUrl && !dataDir)
    throw new Error(
      "--target needs the target's store to register phones and mint keys: set PHONEBRIDGE_DATABASE_URL (or PHONEBRIDGE_DATA_DIR)",
    );
  const { openStore } = await import('../../src/store/index.ts');
  const { createKey, registerDevices } = await import('../../src/provisioning.ts');
  const opened = await openStore({ databaseUrl, dataDir: dataDir ?? '', role: 'cli', poolMax: 4 });
  const store = opened.store;
  const node: TargetNode = {
    url,
    mcpUrl: `${url}/mcp`,
    devices: (count, publicKey) => registerDevices(store, { relay: url, count, publicKey, namePrefix: 'load-' }),
    async keys(deviceIds, scopes) {
      const out = [];
      for (const id of deviceIds) out.push(await createKey(store, id, scopes));
      return out.map((k) => ({ id: k.id, token: k.token }));
    },
  };
  return { node, close: () => opened.close() };
}

/** One node to load: --target's, or a local relay started (and disposed at the end) for the scenario. */
export async function oneNode(
  target: string | undefined,
  defer: (fn: () => Promise<unknown>) => void,
  flags: string[] = [],
): Promise<{ node: TargetNode; store: string }> {
  if (target) {
    const t = await targetNode(target);
    defer(() => t.close());
    return { node: t.node, store: 'target' };
  }
  const relays = await startRelays({ flags });
  defer(() => relays.dispose());
  return { node: relays.nodes[0], store: relays.store.kind };
}
