// One small interface between the Redis bus and the topology it runs on
// (docs/decisions/0150-redis-topologies.md): how clients are made, where keys and channels
// live (docs/decisions/0151-redis-key-and-channel-layout.md), and how per-node and
// per-device channels are published and subscribed. The bus itself never asks which
// topology it is on.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Socket } from 'node:net';
import { describeTopology, parseRedisUrl, type Topology } from './topology.ts';

export type RedisClient = Redis | Cluster;

/**
 * Key prefixes and channel names. Each script runs on one group, whose prefix is its
 * ARGV[1] (scripts.ts): on a cluster every group is one hash tag, so one slot.
 */
export interface KeyLayout {
  /** Ownership and liveness: dev:, owned:, nodes, boots, beats. */
  readonly own: string;
  /** Session records, their indexes and replay buffers: sess:, sx:, ev:, evm:. */
  readonly sess: string;
  /** Single-key state (nonces, rate-limit windows): any slot. */
  readonly single: string;
  /**
   * Control events: every node hears them (plain pub/sub on every topology), published from the
   * ownership group's server so that one node's events keep their order (scripts.ts `control`).
   */
  readonly control: string;
  /** Where `sendToNode` publishes (sharded on a cluster). */
  node(nodeId: string): string;
  /** Supersede notices, published by the claim scripts as `own + 'ch:node:' + nodeId`. */
  superseded(nodeId: string): string;
  /** Where `publishDevice` publishes (sharded on a cluster). */
  device(deviceId: string): string;
  /** The device of a device channel; undefined for any other channel. */
  deviceOf(channel: string): string | undefined;
}

export interface Connector {
  readonly topology: Topology;
  readonly layout: KeyLayout;
  /** What is tried, for logs and start-up errors (never a password). */
  readonly description: string;
  /** A client, not yet connected. `sub` clients carry the subscriptions. */
  client(role: 'cmd' | 'sub', base: RedisOptions): RedisClient;
  /**
   * A client for node messages whose replies nobody reads (quiet.ts), where one connection
   * reaches every node channel; undefined where channels live on several servers (a cluster).
   */
  quietClient(base: RedisOptions): Redis | undefined;
  /** Connects a client made by `client`: resolves once it can run every command it carries. */
  connect(c: RedisClient): Promise<void>;
  /** Publishes on a node or device channel; how many subscribers got it. */
  publish(c: RedisClient, channel: string, msg: string | Buffer): Promise<number>;
  /** Subscribes node and device channels (several at once). */
  subscribe(sub: RedisClient, channels: string[]): Promise<unknown>;
  unsubscribe(sub: RedisClient, channel: string): Promise<unknown>;
  /** The event on `sub` that carries node and device channel messages as (channel, message) Buffers. */
  readonly messageEvent: 'messageBuffer' | 'smessageBuffer';
  /** Calls `lost` when a part of the topology went away that a closed connection does not report. */
  watch(c: RedisClient, lost: (why: string) => void): void;
  /** The socket commands are written to, when there is exactly one (to cork a turn's commands). */
  stream(c: RedisClient): Socket | undefined;
  /** After a failed start: what each address answered, when the client's own error does not say. */
  explain(): Promise<string | undefined>;
}

/** The connector for `--redis-url` (a RedisUrlError for one that names no topology). */
export function connectorFor(url: string, prefix: string): Connector {
  const t = parseRedisUrl(url);
  if (t.kind === 'cluster') return new ClusterConnector(t, prefix);
  return new SingleConnector(t, prefix);
}

function flatLayout(p: string): KeyLayout {
  const dev = `${p}ch:dev:`;
  return {
    own: p,
    sess: p,
    single: p,
    control: `${p}ch:control`,
    node: (n) => `${p}ch:node:${n}`,
    superseded: (n) => `${p}ch:node:${n}`,
    device: (d) => dev + d,
    deviceOf: (ch) => (ch.startsWith(dev) ? ch.slice(dev.length) : undefined),
  };
}

/**
 * One Redis, directly or through Sentinel: one master holds everything, so the layout is the
 * flat one it has always been (the same keys and channels as before topologies existed).
 */
class SingleConnector implements Connector {
  readonly layout: KeyLayout;
  readonly description: string;
  readonly messageEvent = 'messageBuffer' as const;

  constructor(
    readonly topology: Topology & { kind: 'single' | 'sentinel' },
    prefix: string,
  ) {
    this.layout = flatLayout(prefix);
    this.description = describeTopology(topology);
  }

  client(_role: 'cmd' | 'sub', base: RedisOptions): Redis {
    const t = this.topology;
    if (t.kind === 'single') return new Redis(t.url, base);
    return new Redis({
      ...base,
      sentinels: t.sentinels,
      name: t.masterName,
      db: t.db,
      username: t.username,
      password: t.password,
      sentinelPassword: t.sentinelPassword,
      // A sentinel that does not answer within this is skipped for the next one.
      sentinelCommandTimeout: base.connectTimeout,
      sentinelRetryStrategy: (n) => base.retryStrategy?.(n) ?? null,
      ...(t.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
    });
  }
  quietClient(base: RedisOptions): Redis {
    return this.client('cmd', base);
  }
  connect(c: RedisClient): Promise<void> {
    return c.connect();
  }
  publish(c: RedisClient, channel: string, msg: string | Buffer): Promise<number> {
    return c.publish(channel, msg);
  }
  subscribe(sub: RedisClient, channels: string[]): Promise<unknown> {
    return sub.subscribe(...channels);
  }
  unsubscribe(sub: RedisClient, channel: string): Promise<unknown> {
    return sub.unsubscribe(channel);
  }
  watch(): void {
    // The one connection's 'close' reports everything (a Sentinel failover closes it too).
  }
  stream(c: RedisClient): Socket | undefined {
    return c instanceof Redis ? c.stream : undefined;
  }
  explain(): Promise<string | undefined> {
    return Promise.resolve(undefined); // ioredis's errors name the sentinel's or the server's answer
  }
}

/**
 * Redis Cluster: ownership and sessions each in one hash tag (their scripts touch several keys),
 * single keys anywhere, node and device channels sharded by their own tag
 * (docs/decisions/0151-redis-key-and-channel-layout.md).
 */
class ClusterConnector implements Connector {
  readonly layout: KeyLayout;
  readonly description: string;
  readonly messageEvent = 'smessageBuffer' as const;

  constructor(
    readonly topology: Topology & { kind: 'cluster' },
    prefix: string,
  ) {
    this.description = describeTopology(topology);
    const own = `${prefix}{o}`;
    const dev = `${prefix}ch:dev:{`;
    this.layout = {
      own,
      sess: `${prefix}{s}`,
      single: prefix,
      control: `${prefix}ch:control`,
      node: (n) => `${prefix}ch:node:{${n}}`,
      superseded: (n) => `${own}ch:node:${n}`,
      device: (d) => `${dev}${d}}`,
      deviceOf: (ch) => (ch.startsWith(dev) && ch.endsWith('}') ? ch.slice(dev.length, -1) : undefined),
    };
  }

  client(role: 'cmd' | 'sub', base: RedisOptions): Cluster {
    const t = this.topology;
    const { retryStrategy, enableOfflineQueue, ...nodeOptions } = base;
    const options: ClusterOptions = {
      lazyConnect: true,
      enableOfflineQueue,
      clusterRetryStrategy: (n) => retryStrategy?.(n) ?? 1000,
      scaleReads: 'master',
      // A shard failing over answers CLUSTERDOWN or moves slots: a few quick retries, then the
      // command fails (BusUnavailableError) rather than waiting out the failover.
      maxRedirections: 4,
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      retryDelayOnTryAgain: 50,
      slotsRefreshTimeout: 1000,
      slotsRefreshInterval: 2000,
      shardedSubscribers: role === 'sub',
      redisOptions: {
        ...nodeOptions,
        username: t.username,
        password: t.password,
        ...(t.tls ? { tls: {} } : {}),
      },
    };
    return new Cluster(t.nodes, options);
  }
  quietClient(): undefined {
    return undefined; // node channels are sharded: a message goes to its shard's master
  }
  async connect(c: RedisClient): Promise<void> {
    if (!(c instanceof Cluster) || !c.options.shardedSubscribers) return c.connect();
    // The sharded subscribers (one per master) are set up after the client is ready, from the
    // slots it learned: SSUBSCRIBE before that finds no subscriber for its slot.
    const ready = new Promise<void>((resolve) => c.once('subscribersReady', () => resolve()));
    await c.connect();
    await ready;
  }
  publish(c: RedisClient, channel: string, msg: string | Buffer): Promise<number> {
    return c.spublish(channel, msg) as Promise<number>;
  }
  subscribe(sub: RedisClient, channels: string[]): Promise<unknown> {
    // SSUBSCRIBE takes channels of one slot only: one command per channel.
    return Promise.all(channels.map((ch) => sub.ssubscribe(ch)));
  }
  unsubscribe(sub: RedisClient, channel: string): Promise<unknown> {
    return sub.sunsubscribe(channel);
  }
  watch(c: RedisClient, lost: (why: string) => void): void {
    // A master that dies takes its slots (keys, sharded channels) away while the other
    // connections stay open: that is an outage of the bus until the shard is back. Errors of
    // a node that serves no slot any more (a dead master after its replica took over, still
    // being reconnected to until the pool drops it) are not.
    if (!(c instanceof Cluster)) return;
    c.on('node error', (err: Error, key: string) => {
      if (c.slots.some((nodes) => nodes?.[0] === key)) lost(`cluster node ${key}: ${err.message}`);
    });
  }
  stream(): Socket | undefined {
    return undefined;
  }
  /** ioredis says only that no startup node served; ask each what it is. */
  async explain(): Promise<string | undefined> {
    const t = this.topology;
    const answers = await Promise.all(
      t.nodes.map(async ({ host, port }) => {
        const r = new Redis({
          host,
          port,
          username: t.username,
          password: t.password,
          ...(t.tls ? { tls: {} } : {}),
          lazyConnect: true,
          connectTimeout: 1000,
          commandTimeout: 1000,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        r.on('error', () => {});
        try {
          await r.connect();
          const info = String(await r.cluster('INFO'));
          return `${host}:${port} ${/cluster_state:\w+/.exec(info)?.[0] ?? 'answered CLUSTER INFO'}`;
        } catch (err) {
          return `${host}:${port} ${(err as Error).message.trim()}`;
        } finally {
          r.disconnect();
        }
      }),
    );
    return answers.join('; ');
  }
}
