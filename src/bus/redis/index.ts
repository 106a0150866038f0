// Redis driver of the cluster bus: shared state lives in Redis (atomic Lua), node-to-node traffic
// goes over pub/sub. Two connections: commands, and a subscriber (subscriber mode needs its own);
// where the topology allows, a third carries node messages (quiet.ts; which message goes which
// way is node-outbox.ts).
//
// Failure model: no offline queue and no command retries, so while Redis is unreachable every call
// rejects at once (or after commandTimeoutMs if Redis hangs: BusTimeoutError, the command may have
// run) with BusUnavailableError. The bus is down when a connection closes or when heartbeats fail
// past the node TTL; a late heartbeat within it is not an outage. Once down, calls are refused
// without being sent, even on a connection that is still open (a hung Redis), until the bus is
// back: only the recovery's own commands (resubscribe, heartbeat) probe Redis meanwhile.
// ioredis keeps reconnecting; once both connections are back we resubscribe, re-announce the
// node and fire onReconnected. Nothing is re-claimed automatically: the gateway calls reclaimDevice.
import { performance } from 'node:perf_hooks';
import { type Buffer } from 'node:buffer';
import { createHash, randomBytes } from 'node:crypto';
import type { RedisOptions } from 'ioredis';
import type { Logger } from '../../log.ts';
import { BusTimeoutError, BusUnavailableError } from '../errors.ts';
import type { Bus, ControlEvent, DeviceOwner, ReplayEvent } from '../types.ts';
import { checkStreamId, DEFAULT_REPLAY, eventId, Handlers, parseEventId, type ReplayLimits } from '../util.ts';
import { GROUP, lua, type ScriptName } from './scripts.ts';
import { connectorFor, type Connector, type KeyLayout, type RedisClient } from './connector.ts';
import { readPushesDirectly, type MessageAt } from './push-reader.ts';
import { runAt, runOf, type Run } from '../../protocol/json-bytes.ts';
import { QuietPublisher } from './quiet.ts';
import { NODE_MESSAGE, NodeOutbox } from './node-outbox.ts';
import { RedisSessions } from './sessions.ts';
import { redisCommand, unreadable } from '../../metrics.ts';
import {
  bootRecord,
  decodeControl,
  decodeDeviceFrame,
  decodeOwner,
  decodeReplayEntry,
  decodeSupersede,
  encodeControl,
  encodeDeviceFrame,
  UnreadableFormatError,
  type NodeHead,
} from '../formats.ts';

export interface RedisBusOptions {
  /** Namespace of every key and channel. Default `pb:`; tests use a random one. */
  prefix?: string;
  /** A node not renewed for this long is dead: its devices count as unowned. Default 3000. */
  nodeTtlMs?: number;
  /** How often the node renews itself and looks for dead peers. Default 1000. */
  heartbeatMs?: number;
  /** Longest wait for any Redis reply (a hung Redis, not a closed one). Default 1000. */
  commandTimeoutMs?: number;
  replay?: Partial<ReplayLimits>;
  /** Longest an answer published without its reply waits for Redis to confirm it (quiet.ts). Default 100. */
  quietConfirmMs?: number;
}

/** How long a start may take to reach the topology before it fails. */
const START_TIMEOUT_MS = 10_000;

const DEFAULTS = { prefix: 'pb:', nodeTtlMs: 3000, heartbeatMs: 1000, commandTimeoutMs: 1000 };

const SHA = Object.fromEntries(
  Object.entries(lua).map(([name, src]) => [name, createHash('sha1').update(src).digest('hex')]),
) as Record<ScriptName, string>;

// Replies that mean "Redis cannot serve right now" rather than "this command is wrong".
const TRANSIENT_REPLY = /^(LOADING|READONLY|MASTERDOWN|BUSY|TRYAGAIN|CLUSTERDOWN|OOM)/;

function asBusError(err: unknown): Error {
  if (err instanceof BusUnavailableError) return err;
  const e = err as Error;
  if (e?.name === 'ReplyError' && !TRANSIENT_REPLY.test(e.message)) return e; // a bug, not an outage
  // ioredis's commandTimeout: the connection is open, the reply late.
  if (e?.message === 'Command timed out')
    return new BusTimeoutError(`cluster bus did not answer in time: ${e.message}`, { cause: err });
  return new BusUnavailableError(`cluster bus unavailable: ${e?.message ?? String(err)}`, { cause: err });
}

interface DeviceSub {
  handlers: Set<(frame: string) => void>;
  subscribed: Promise<unknown>;
}

function uncorkTurn(bus: RedisBus): void {
  bus.uncork();
}

export class RedisBus implements Bus {
  readonly kind = 'redis' as const;
  readonly sessions: RedisSessions;
  private readonly o: typeof DEFAULTS;
  private readonly replayLimits: ReplayLimits;
  /** Tells a restart under the same node id apart; announced with the liveness format (formats.ts). */
  private readonly boot = bootRecord(randomBytes(8).toString('hex'));
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  /** Node messages whose reply nobody reads (replyToNode), where the topology allows it. */
  private readonly quiet?: QuietPublisher;
  private readonly layout: KeyLayout;
  private readonly chControl: string;
  private readonly chSelf: string;
  /** chSelf's bytes, as runAt compares them. */
  private readonly chSelfRun: Run;
  /** Supersede notices: the node channel itself on one Redis, a plain channel on a cluster. */
  private readonly chSuperseded: string;
  private readonly devices = new Map<string, DeviceSub>();
  private peers = new Map<string, string>(); // alive node -> boot id, as of the last heartbeat
  private up = false;
  /**
   * Declared down (markDown) and not back yet: every call is refused at once instead of being
   * sent, so that on a connection Redis keeps open but no longer answers, each does not wait out
   * commandTimeoutMs. Recovery (tick → recover → resync) probes Redis with its own commands.
   */
  private down = false;
  private started = false;
  private closing = false;
  private resyncing?: Promise<void>;
  private beating?: Promise<boolean>;
  /** When a heartbeat last succeeded: until nodeTtlMs after it, this node is alive for its peers. */
  private lastBeatAt = 0;
  /** How long the last successful heartbeat took (ms): /readyz shows a slow Redis with it. */
  private lastBeatMs: number | undefined;
  /**
   * Until then this node's heartbeats reap no peer and report none down for a lapsed deadline
   * alone: its own link to Redis was down (or its heartbeats late) within the last node TTL, so
   * a peer's lapsed deadline may be the same outage, not a dead peer. Reaped, a peer's reclaim
   * would take a new epoch instead of keeping its claim; reported down, the requests waiting on
   * it would fail as if its process had died
   * (docs/decisions/0210-no-phone-offline-because-redis-was-down.md).
   */
  private blindUntil = 0;
  private announced = false;
  private timer?: NodeJS.Timeout;
  /** The last connection error ioredis reported: what answered, when a start fails. */
  private lastError?: string;
  private corkedStream?: NonNullable<ReturnType<Connector['stream']>>;
  /** Node messages out: which connection, counted or quiet (node-outbox.ts). */
  private readonly outbox: NodeOutbox;

  private readonly on: {
    control: Handlers<[ControlEvent]>;
    superseded: Handlers<[string, number]>;
    nodeDown: Handlers<[string]>;
    nodeMessage: Handlers<[string]>;
    nodeBytes: Handlers<[Buffer, number, number]>;
    unavailable: Handlers<[]>;
    reconnected: Handlers<[]>;
  };

  private constructor(
    private readonly connector: Connector,
    readonly nodeId: string,
    private readonly log: Logger,
    opts: RedisBusOptions,
  ) {
    this.o = { ...DEFAULTS, ...definedOnly(opts) };
    const h = <A extends unknown[]>(what: string) => new Handlers<A>(what, log);
    this.on = {
      control: h('control'),
      superseded: h('superseded'),
      nodeDown: h('node down'),
      nodeMessage: h('node message'),
      nodeBytes: h('node message'),
      unavailable: h('unavailable'),
      reconnected: h('reconnected'),
    };
    this.replayLimits = { ...DEFAULT_REPLAY, ...opts.replay };
    this.layout = connector.layout;
    this.chControl = this.layout.control;
    this.chSelf = this.layout.node(nodeId);
    this.chSelfRun = runOf(this.chSelf);
    this.chSuperseded = this.layout.superseded(nodeId);
    const common: RedisOptions = {
      lazyConnect: true,
      enableOfflineQueue: false, // fail fast instead of queueing while disconnected
      maxRetriesPerRequest: 0, // in-flight commands fail on disconnect ...
      autoResendUnfulfilledCommands: false, // ... and are never replayed later (claims, INCRs)
      autoResubscribe: false, // resync() resubscribes, then reports recovery
      commandTimeout: this.o.commandTimeoutMs,
      connectTimeout: 2000,
      retryStrategy: (n) => Math.min(50 * 2 ** n, 1000),
    };
    this.cmd = connector.client('cmd', { ...common, connectionName: `phonebridge:${nodeId}:cmd` });
    this.sub = connector.client('sub', { ...common, connectionName: `phonebridge:${nodeId}:sub` });
    // Before anything is subscribed on a new connection (recover, below, resubscribes later).
    this.sub.on('ready', () => this.readMessagesDirectly());
    for (const c of [this.cmd, this.sub]) {
      c.on('error', (err: Error) => {
        this.lastError = err.message;
        this.log.debug({ err: err.message }, 'redis connection error');
      });
      c.on('close', () => this.markDown('connection closed'));
      c.on('ready', () => void this.recover());
      connector.watch(c, (why) => this.markDown(why));
    }
    const quiet = connector.quietClient({ ...common, connectionName: `phonebridge:${nodeId}:quiet` });
    if (quiet)
      this.quiet = new QuietPublisher(quiet, asBusError, this.o.commandTimeoutMs, opts.quietConfirmMs, (why) =>
        this.log.warn(
          { why },
          'redis quiet connection: replies out of order (a command refused while replies were off?); replacing it',
        ),
      );
    this.outbox = new NodeOutbox(this.layout, this.chSelf, this.quiet, {
      publish: (channel, body) => this.op((r) => this.connector.publish(r, channel, body)),
      uncork: () => this.uncork(),
    });
    // As bytes: a node message's payload (a phone frame) goes on as a view of what was read.
    const onMessage = (channel: Buffer, msg: Buffer) => this.dispatchBytes(channel, msg);
    this.sub.on('messageBuffer', onMessage);
    if (connector.messageEvent !== 'messageBuffer') this.sub.on(connector.messageEvent, onMessage);
    this.sessions = new RedisSessions(this);
  }

  /** Connects both connections, subscribes and announces the node; BusUnavailableError if Redis is down. */
  static async connect(url: string, nodeId: string, log: Logger, opts: RedisBusOptions = {}): Promise<RedisBus> {
    const connector = connectorFor(url, opts.prefix ?? DEFAULTS.prefix);
    const bus = new RedisBus(connector, nodeId, log, opts);
    let timer: NodeJS.Timeout | undefined;
    try {
      // A topology that keeps failing (sentinels that do not answer, a cluster that is not one)
      // would have ioredis retry forever: the start gives up after START_TIMEOUT_MS.
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new Error(`no usable answer in ${START_TIMEOUT_MS / 1000} s (last: ${bus.lastError ?? 'none'})`)),
          START_TIMEOUT_MS,
        );
      });
      await Promise.race([
        Promise.all([connector.connect(bus.cmd), connector.connect(bus.sub)])
          .then(() => bus.resync())
          .then(() => bus.untilPeersHeard()),
        timeout,
      ]);
    } catch (err) {
      bus.cmd.disconnect();
      bus.sub.disconnect();
      // What was tried and what answered: the one line serve exits with.
      const e = asBusError(err);
      const said = detail(err);
      const last = bus.lastError && !said.includes(bus.lastError) ? ` (last error: ${bus.lastError})` : '';
      const nodes = await connector.explain().catch(() => undefined);
      e.message = `${connector.description}: ${said}${last}${nodes ? `; ${nodes}` : ''}`;
      throw e;
    } finally {
      clearTimeout(timer);
    }
    bus.started = true;
    // Optional: until it is ready (or if the server refuses CLIENT REPLY), replies take the
    // command connection.
    bus.quiet?.connect();
    bus.timer = setInterval(() => bus.tick(), bus.o.heartbeatMs);
    bus.timer.unref();
    return bus;
  }

  get available(): boolean {
    return this.up;
  }

  get lastRoundTripMs(): number | undefined {
    return this.lastBeatMs;
  }

  // --- plumbing ---------------------------------------------------------------------------------

  /**
   * @internal Runs a script; reloads it if Redis lost its script cache (restart). Its key group's
   * prefix is ARGV[1]; `route` (KEYS[1]) is a key of the slot it touches, so a cluster sends it
   * to the shard that holds that slot (the group's own slot unless given).
   */
  run(name: ScriptName, args: Array<string | number>, route?: string): Promise<unknown> {
    return this.down ? Promise.reject(refused()) : this.script(name, args, route);
  }

  /** run() even while the bus is down: recovery's heartbeat, the farewell on close. */
  private async script(name: ScriptName, args: Array<string | number>, route?: string): Promise<unknown> {
    const started = performance.now();
    const p = this.layout[GROUP[name]];
    const key = route ?? `${p}slot`;
    try {
      try {
        this.corkTurn();
        return await this.cmd.evalsha(SHA[name], 1, key, p, ...args);
      } catch (err) {
        if (!(err as Error).message?.startsWith('NOSCRIPT')) throw err;
        return await this.cmd.eval(lua[name], 1, key, p, ...args);
      }
    } catch (err) {
      throw asBusError(err);
    } finally {
      redisCommand.since(started);
    }
  }

  /**
   * Holds this turn's commands in the command socket until the end of the turn (libuv's check
   * phase, as the HTTP answers: docs/decisions/0050-one-write-per-answer.md), so they leave
   * in one write instead of a syscall each (docs/decisions/0132-cluster-path.md). Order is
   * kept, and nothing waits for a previous batch's replies (unlike ioredis' auto-pipelining).
   */
  private corkTurn(): void {
    if (this.corkedStream || this.cmd.status !== 'ready') return;
    const stream = this.connector.stream(this.cmd);
    if (!stream || stream.destroyed) return;
    stream.cork();
    this.corkedStream = stream;
    setImmediate(uncorkTurn, this);
  }

  /** @internal */
  uncork(): void {
    const stream = this.corkedStream;
    this.corkedStream = undefined;
    if (stream && !stream.destroyed) stream.uncork();
  }

  private async op<T>(f: (r: RedisClient) => Promise<T>): Promise<T> {
    if (this.down) throw refused();
    const started = performance.now();
    try {
      this.corkTurn();
      return await f(this.cmd);
    } catch (err) {
      throw asBusError(err);
    } finally {
      redisCommand.since(started);
    }
  }

  /** A single-key name (nonces, rate-limit windows): any slot on a cluster. */
  private key(k: string): string {
    return this.layout.single + k;
  }

  private markDown(why: string): void {
    if (!this.started || this.closing || !this.up) return;
    this.up = false;
    this.down = true;
    this.blindUntil = Infinity;
    this.sessions.dropAll();
    this.log.warn({ node: this.nodeId, why }, 'cluster bus unavailable');
    this.on.unavailable.emit();
  }

  /** Once both connections are ready again: resubscribe, re-announce, report. */
  private recover(): Promise<void> | undefined {
    if (!this.started || this.closing || this.up || this.resyncing) return this.resyncing;
    if (this.cmd.status !== 'ready' || this.sub.status !== 'ready') return undefined;
    this.resyncing = this.resync()
      .then(() => {
        this.sessions.dropAll(); // broadcasts sent meanwhile were missed
        this.log.info({ node: this.nodeId }, 'cluster bus recovered');
        this.on.reconnected.emit();
      })
      .catch((err) => this.log.debug({ err: (err as Error).message }, 'cluster bus resync failed; retrying'))
      .finally(() => (this.resyncing = undefined));
    return this.resyncing;
  }

  private async resync(): Promise<void> {
    const plain = this.chSuperseded === this.chSelf ? [this.chControl] : [this.chControl, this.chSuperseded];
    const sharded = [this.chSelf, ...[...this.devices.keys()].map((d) => this.layout.device(d))];
    await Promise.all([this.sub.subscribe(...plain), this.connector.subscribe(this.sub, sharded)]).catch((err) =>
      Promise.reject(asBusError(err)),
    );
    // Peers lost Redis too, most likely: give them a whole TTL to renew before reaping any.
    if (this.announced) this.blindUntil = Date.now() + this.o.nodeTtlMs;
    // Redis answers again (the subscriptions went through): calls may go from here on, so the
    // heartbeat's own reports (a peer that lapsed meanwhile) can look up where its phones are.
    this.down = false;
    try {
      await this.beat();
    } catch (err) {
      this.down = true;
      throw err;
    }
    this.up = true;
  }

  /**
   * Waits until every live peer has renewed itself since this process announced its node id. A
   * peer reports the id's previous process down at its first heartbeat that sees the new boot
   * record (or the id gone): it orphans the requests that id sent it and fails those it sent
   * there. Anything this process sent or served before then would be taken for its
   * predecessor's (docs/decisions/0245-a-restarted-node-waits-to-be-heard.md). One heartbeat
   * period when peers are alive, none for a lone node; bounded by three heartbeat periods (and
   * the node TTL): a peer silent that long is stalled or dead.
   */
  private async untilPeersHeard(): Promise<void> {
    const until = Date.now() + Math.min(this.o.nodeTtlMs, 3 * this.o.heartbeatMs);
    let since = '';
    for (;;) {
      const [first, unheard] = (await this.script('unheard', [this.nodeId, since])) as [string, number];
      since = first;
      if (Number(unheard) === 0 || Date.now() >= until) return;
      await new Promise((r) => setTimeout(r, Math.max(10, this.o.heartbeatMs / 10)));
      // The heartbeat timer starts after connect: renew meanwhile, or a long wait lapses this node.
      if (Date.now() - this.lastBeatAt >= this.o.heartbeatMs) await this.beat();
    }
  }

  private tick(): void {
    if (!this.up) {
      void this.recover(); // also retries a resync that failed half-way
      return;
    }
    if (this.beating) return; // Redis is slow; do not pile up heartbeats
    this.beat().then(
      (lapsed) => {
        if (!lapsed || !this.up) return;
        this.sessions.dropAll(); // presumed dead for a while: broadcasts may have been missed
        this.on.reconnected.emit();
      },
      (err) => {
        // A late heartbeat on an open connection (Redis or this process busy) is not an outage
        // while this node is still alive for its peers: declaring the bus down would fail every
        // request in flight. A closed connection marks it down at once (on 'close').
        const late = err instanceof BusTimeoutError && this.cmd.status === 'ready';
        if (late && Date.now() - this.lastBeatAt < this.o.nodeTtlMs) {
          this.blindUntil = Math.max(this.blindUntil, Date.now() + this.o.nodeTtlMs);
          this.log.warn({ node: this.nodeId }, 'cluster bus heartbeat late');
          return;
        }
        this.markDown(`heartbeat failed: ${(err as Error).message}`);
      },
    );
  }

  /**
   * Renews this node, reaps dead ones, reports peers that vanished. True if this node had been
   * presumed dead (its ownership may have been reaped): the gateway must reclaim its sockets.
   */
  private beat(): Promise<boolean> {
    this.beating ??= (async () => {
      const sentAt = Date.now(); // the script ran no earlier: alive at least until sentAt + nodeTtlMs
      const t = performance.now();
      const reap = sentAt >= this.blindUntil ? 1 : 0;
      // Redis itself skips the reaping when this node's previous renewal is older than
      // `watchGapMs`: a heartbeat held up by a failover runs late, after its peers lapsed too.
      // A peer on the same cadence lapses in an outage only if this node's own renewals were at
      // least a TTL less one period apart. (A process's first heartbeat has watched nothing yet;
      // it reaps as it always has.)
      const watchGapMs = Math.max(this.o.heartbeatMs, this.o.nodeTtlMs - this.o.heartbeatMs);
      const args = [this.nodeId, this.boot, this.o.nodeTtlMs, reap, ...(this.announced ? [watchGapMs] : [])];
      const r = (await this.script('heartbeat', args)) as Array<string | number>;
      this.lastBeatMs = Math.round((performance.now() - t) * 10) / 10;
      // Heartbeats that did not follow each other closely (Redis away, a failover, this process
      // stalled): what lapsed meanwhile may be that trouble, not a dead peer.
      if (this.announced && Date.now() - this.lastBeatAt > watchGapMs)
        this.blindUntil = Math.max(this.blindUntil, Date.now() + this.o.nodeTtlMs);
      this.lastBeatAt = sentAt;
      const [wasAlive, prevBoot] = [Number(r[0]), String(r[1])];
      const now = new Map<string, string>();
      for (let i = 2; i < r.length; i += 2) now.set(String(r[i]), String(r[i + 1]));
      let lapsed = false;
      if (!this.announced) {
        if (wasAlive && prevBoot)
          this.log.warn({ node: this.nodeId }, 'node id was still announced by a previous process');
      } else if (prevBoot === this.boot || prevBoot === '') {
        lapsed = !wasAlive; // expired, reaped by a peer, or Redis lost its data
      } else {
        this.log.error({ node: this.nodeId }, 'another process announces this node id');
        lapsed = true;
      }
      this.announced = true;
      if (lapsed) {
        this.log.warn({ node: this.nodeId }, 'this node had been presumed dead');
        this.blindUntil = Math.max(this.blindUntil, Date.now() + this.o.nodeTtlMs);
      }
      this.peers = this.judgePeers(now);
      return lapsed;
    })().finally(() => (this.beating = undefined));
    return this.beating;
  }

  /**
   * Reports the peers whose process went: announced by another process (a restart under the
   * same id), or gone from the live nodes (lapsed, reaped, left). A peer that only lapsed while
   * this node could not watch (blindUntil) is kept as it was and judged once this node can: the
   * outage that hid this node's own heartbeats most likely held up the peer's too. Returns the
   * peers as they now stand.
   */
  private judgePeers(alive: Map<string, string>): Map<string, string> {
    const watching = Date.now() >= this.blindUntil;
    for (const [n, boot] of this.peers) {
      if (n === this.nodeId) continue;
      const seen = alive.get(n);
      if (seen === boot) continue;
      if (seen === undefined && !watching) alive.set(n, boot);
      else this.on.nodeDown.emit(n);
    }
    return alive;
  }

  /**
   * Node and device messages are cut from the subscriber's socket here instead of by ioredis
   * (push-reader.ts), where the topology has one such socket; ioredis delivers them otherwise.
   */
  private readMessagesDirectly(): void {
    const socket = this.connector.stream(this.sub);
    if (!socket) return;
    if (!readPushesDirectly(socket, (b, at) => this.dispatchAt(b, at)))
      this.log.debug('redis subscriber: messages left to ioredis (its decoder was not found)');
  }

  /**
   * A message as the direct reader found it: a node message on this node's channel is compared
   * and handed on where it lies (no view: its reader makes the payload's), not through views of
   * its channel and payload and Buffer#equals (about 2.8 thousand instructions per message
   * against 1.0 with one view).
   */
  private dispatchAt(b: Buffer, at: Readonly<MessageAt>): void {
    const { channelStart, channelEnd, payloadStart, payloadEnd } = at;
    if (payloadEnd > payloadStart && b[payloadStart] === NODE_MESSAGE && this.isSelf(b, channelStart, channelEnd))
      return this.nodeBytesHere(b, payloadStart + 1, payloadEnd);
    this.dispatchBytes(b.subarray(channelStart, channelEnd), b.subarray(payloadStart, payloadEnd));
  }

  /** Whether b[start, end) is this node's channel. */
  private isSelf(b: Buffer, start: number, end: number): boolean {
    return end - start === this.chSelfRun.length && runAt(b, start, this.chSelfRun);
  }

  /** The node message b[start, end) (after its `m` tag), to this node's handlers. */
  private nodeBytesHere(b: Buffer, start: number, end: number): void {
    if (!this.on.nodeBytes.empty) this.on.nodeBytes.emit(b, start, end);
    if (!this.on.nodeMessage.empty) this.on.nodeMessage.emit(b.toString('utf8', start, end));
  }

  private dispatchBytes(channel: Buffer, msg: Buffer): void {
    if (msg[0] === NODE_MESSAGE && this.isSelf(channel, 0, channel.length))
      return this.nodeBytesHere(msg, 1, msg.length);
    this.dispatch(channel.toString('utf8'), msg.toString('utf8'));
  }

  private dispatch(channel: string, msg: string): void {
    if (channel === this.chSelf || channel === this.chSuperseded) {
      if (msg[0] === 'm') this.on.nodeMessage.emit(msg.slice(1));
      else if (msg[0] === 's') {
        const n = this.read(() => decodeSupersede(msg));
        if (n) this.on.superseded.emit(n.deviceId, n.epoch);
      }
    } else if (channel === this.chControl) {
      const event = this.read(() => decodeControl<ControlEvent>(msg));
      if (!event) return;
      // Sessions ended on some node: this node's leases on them end before anything else runs.
      if (event.type === 'sessions_ended' && Array.isArray(event.sessionIds)) this.sessions.drop(event.sessionIds);
      this.on.control.emit(event);
    } else {
      const d = this.layout.deviceOf(channel);
      const s = d === undefined ? undefined : this.devices.get(d);
      const frame = s && this.read(() => decodeDeviceFrame(msg));
      if (frame === undefined) return;
      for (const h of [...s!.handlers]) {
        try {
          h(frame);
        } catch (err) {
          this.log.error({ err }, 'device frame handler threw');
        }
      }
    }
  }

  /**
   * @internal A message or record read with its format's decoder (formats.ts); one this node
   * cannot read is counted and logged (never its content) and reads as undefined.
   */
  read<T>(decode: () => T): T | undefined {
    try {
      return decode();
    } catch (err) {
      if (!(err instanceof UnreadableFormatError)) throw err;
      unreadable[err.format].inc();
      this.log.warn({ format: err.format, version: err.version, why: err.message }, 'unreadable bus message or record');
      return undefined;
    }
  }

  // --- nonces, counters, control ----------------------------------------------------------------

  async putNonce(nonce: string, deviceId: string, ttlMs: number): Promise<void> {
    await this.op((r) => r.set(this.key(`nonce:${nonce}`), deviceId, 'PX', ttlMs));
  }
  async takeNonce(nonce: string): Promise<string | undefined> {
    // GETDEL is atomic: of concurrent takers exactly one sees the value.
    return (await this.op((r) => r.getdel(this.key(`nonce:${nonce}`)))) ?? undefined;
  }
  async hit(key: string, windowMs: number): Promise<number> {
    return Number(await this.run('hit', [key, windowMs], this.key(`rl:${key}`)));
  }
  async unhit(key: string): Promise<void> {
    await this.run('unhit', [key], this.key(`rl:${key}`));
  }
  async peek(key: string): Promise<number> {
    return Number((await this.op((r) => r.get(this.key(`rl:${key}`)))) ?? 0);
  }
  async mark(key: string, ttlMs: number): Promise<void> {
    // The counter's key, so a release that reads the flag with `peek` (or marks it with `hit`) still does.
    await this.op((r) => r.set(this.key(`rl:${key}`), '1', 'PX', ttlMs));
  }
  async publishControl(event: ControlEvent): Promise<void> {
    // Through the ownership shard (scripts.ts `control`): one server, so the events keep their order.
    await this.run('control', [this.chControl, encodeControl(event)]);
    // Redis writes a publish's reply and its messages to subscribers in one pass before it
    // sleeps, in an order of its own: the reply may go first and, on a loaded machine, reach
    // this node's client before a subscriber has the message. Redis reads the next command only
    // after that pass, so its reply means every subscriber's socket holds the event.
    await this.op((r) => r.ping());
  }
  onControl(handler: (event: ControlEvent) => void): void {
    this.on.control.add(handler);
  }

  // --- ownership and liveness -------------------------------------------------------------------

  async claimDevice(deviceId: string): Promise<number> {
    return Number(await this.run('claim', [this.nodeId, deviceId]));
  }
  async reclaimDevice(deviceId: string, epoch: number): Promise<number | undefined> {
    const r = await this.run('reclaim', [this.nodeId, deviceId, epoch]);
    return r == null ? undefined : Number(r);
  }
  async releaseDevice(deviceId: string, epoch: number): Promise<boolean> {
    return Number(await this.run('release', [this.nodeId, deviceId, epoch])) === 1;
  }
  async ownerOf(deviceId: string): Promise<DeviceOwner | undefined> {
    const r = await this.run('owner', [deviceId]);
    return this.read(() => decodeOwner(r));
  }
  onSuperseded(handler: (deviceId: string, epoch: number) => void): void {
    this.on.superseded.add(handler);
  }
  async aliveNodes(): Promise<string[]> {
    return ((await this.run('alive', [])) as string[]).map(String);
  }
  othersAlive(): boolean {
    for (const n of this.peers.keys()) if (n !== this.nodeId) return true;
    return false;
  }
  onNodeDown(handler: (nodeId: string) => void): void {
    this.on.nodeDown.add(handler);
  }

  // --- messaging ----------------------------------------------------------------------------------

  sendToNode(nodeId: string, msg: NodeHead, payload?: Buffer): Promise<boolean> {
    return this.outbox.sendToNode(nodeId, msg, payload);
  }
  /** @internal Whether replies go out without Redis' answers now (tests). */
  get quietReady(): boolean {
    return this.outbox.quietReady;
  }
  replyToNode(nodeId: string, msg: NodeHead, payload?: Buffer): Promise<void> {
    return this.outbox.replyToNode(nodeId, msg, payload);
  }
  sendOrBounce(nodeId: string, msg: NodeHead, payload: Buffer | undefined, bounce: NodeHead): Promise<boolean> {
    return this.outbox.sendOrBounce(nodeId, msg, payload, bounce);
  }
  onNodeMessage(handler: (msg: string) => void): void {
    this.on.nodeMessage.add(handler);
  }
  onNodeBytes(handler: (bytes: Buffer, start: number, end: number) => void): void {
    this.on.nodeBytes.add(handler);
  }
  async publishDevice(deviceId: string, frame: string): Promise<number> {
    return this.op((r) => this.connector.publish(r, this.layout.device(deviceId), encodeDeviceFrame(frame)));
  }
  async subscribeDevice(deviceId: string, handler: (frame: string) => void): Promise<() => void> {
    if (this.down) throw refused();
    let s = this.devices.get(deviceId);
    if (!s) {
      s = { handlers: new Set(), subscribed: this.connector.subscribe(this.sub, [this.layout.device(deviceId)]) };
      this.devices.set(deviceId, s);
    }
    const entry = (frame: string) => handler(frame); // distinct per call: the same handler may subscribe twice
    s.handlers.add(entry);
    const leave = () => {
      s.handlers.delete(entry);
      if (s.handlers.size > 0 || this.devices.get(deviceId) !== s) return;
      this.devices.delete(deviceId);
      // If Redis is down this fails, and resync() will not resubscribe it: nothing else to do.
      this.connector.unsubscribe(this.sub, this.layout.device(deviceId)).catch(() => {});
    };
    try {
      await s.subscribed;
    } catch (err) {
      leave();
      throw asBusError(err);
    }
    let left = false;
    return () => {
      if (!left) leave();
      left = true;
    };
  }

  // --- replay buffer ------------------------------------------------------------------------------

  async appendEvent(sessionId: string, streamId: string, data: string): Promise<string | undefined> {
    checkStreamId(streamId);
    const { maxEvents, maxBytes, ttlMs } = this.replayLimits;
    const seq = await this.run('append', [sessionId, streamId, data, maxEvents, maxBytes, ttlMs]);
    return seq == null ? undefined : eventId(streamId, Number(seq)); // nil: the session is gone
  }
  async replayAfter(sessionId: string, lastEventId: string): Promise<ReplayEvent[]> {
    const last = parseEventId(lastEventId);
    if (!last) return [];
    const entries = await this.op((r) => r.lrange(`${this.layout.sess}ev:${sessionId}`, 0, -1));
    const out: ReplayEvent[] = [];
    for (const raw of entries) {
      const e = this.read(() => decodeReplayEntry(raw));
      if (e && e.streamId === last.streamId && e.seq > last.seq)
        out.push({ id: eventId(e.streamId, e.seq), data: e.data });
    }
    return out;
  }

  // --- health -------------------------------------------------------------------------------------

  onUnavailable(handler: () => void): void {
    this.on.unavailable.add(handler);
  }
  onReconnected(handler: () => void): void {
    this.on.reconnected.add(handler);
  }

  /** Leaves the cluster (this node's devices become unowned at once) and closes both connections. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.up = false;
    clearInterval(this.timer);
    await this.script('leave', [this.nodeId]).catch(() => {});
    this.quiet?.close();
    await Promise.allSettled([this.cmd.quit(), this.sub.quit()]);
    this.cmd.disconnect();
    this.sub.disconnect();
  }
}

/** A call while the bus is down: refused without being sent (RedisBus.down). */
function refused(): BusUnavailableError {
  return new BusUnavailableError(
    'cluster bus unavailable: Redis is down for this node (waiting for it to answer again)',
  );
}

/** What answered, in a few words: the reply or the last node's error (a cluster's own error says little). */
function detail(err: unknown): string {
  const e = err as Error & { lastNodeError?: Error };
  const last = e?.lastNodeError?.message;
  return last ? `${e.message} (${last})` : (e?.message ?? String(err));
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
