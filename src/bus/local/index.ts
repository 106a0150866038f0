// In-process bus for a single node: maps with expiry. Nothing leaves the process.
/* eslint-disable @typescript-eslint/require-await -- every method implements the async Bus/SessionStore
   interfaces with a synchronous body; async keeps a throw a rejection, as on the Redis bus. */
import { Buffer } from 'node:buffer';
import type { Logger } from '../../log.ts';
import type { Bus, ControlEvent, DeviceOwner, ReplayEvent, SessionRecord, SessionStore } from '../types.ts';
import { checkStreamId, DEFAULT_REPLAY, eventId, Handlers, parseEventId, type ReplayLimits } from '../util.ts';
import { ExpiringMap } from '../expiring-map.ts';
import { ReplayBudget, type ReplayEntry } from './replay-budget.ts';
import { localBusDropped } from '../../metrics.ts';
import type { NodeHead } from '../formats.ts';
import type { Count } from '../../metric-cells.ts';

/**
 * Live challenge nonces, and rate-limit windows (and marks), one in-process bus holds at most.
 * Anyone may ask for a challenge, and every address opens windows of its own: past a bound the
 * oldest entry is forgotten (a phone whose nonce it was asks again), so that many addresses at
 * once cost this process a bounded amount of memory — about 100 MB for both at the worst
 * (measured with `--expose-gc`: 250,000 nonces for ids of 128 characters took 164 MB of heap,
 * 250,000 IPv6 windows 81 MB). A phone needs its nonce for one round trip, and a nonce is gone
 * once used: it takes an attack from more than a thousand addresses at their challenge limit
 * before a nonce is forgotten within a second of its challenge.
 */
export const LOCAL_BUS_BOUNDS = { nonces: 100_000, windows: 100_000 };

/** Session ids grouped by one field of their record. */
class SessionIndex {
  private readonly groups = new Map<string, Set<string>>();
  constructor(private readonly key: (s: SessionRecord) => string) {}

  /** Adds the session; returns its group. */
  add(s: SessionRecord): Set<string> {
    const k = this.key(s);
    let set = this.groups.get(k);
    if (!set) this.groups.set(k, (set = new Set()));
    set.add(s.id);
    return set;
  }
  remove(s: SessionRecord): void {
    const k = this.key(s);
    const set = this.groups.get(k);
    if (!set) return;
    set.delete(s.id);
    if (set.size === 0) this.groups.delete(k);
  }
  ids(k: string): readonly string[] {
    return [...(this.groups.get(k) ?? [])];
  }
}

class LocalSessions implements SessionStore {
  // evseq numbers the session's SSE events; it lives exactly as long as the session. `used`
  // orders the uses of all sessions (a counter, not a clock: no ties), so a key over its cap
  // loses its least recently used session, and a use costs no index update.
  private readonly map: ExpiringMap<{ s: SessionRecord; evseq: number; used: number }>;
  private uses = 0;
  private readonly byToken = new SessionIndex((s) => s.tokenId);
  /** So counting a phone's clients (the dashboard) does not walk every session of the node. */
  private readonly byDevice = new SessionIndex((s) => s.deviceId);
  constructor(private readonly dropped: (id: string) => void) {
    this.map = new ExpiringMap((id, e) => {
      this.unindex(e.s);
      dropped(id);
    });
  }

  get size(): number {
    return this.map.size;
  }
  close(): void {
    this.map.close();
  }

  private index(s: SessionRecord): Set<string> {
    this.byDevice.add(s);
    return this.byToken.add(s);
  }
  private unindex(s: SessionRecord): void {
    this.byToken.remove(s);
    this.byDevice.remove(s);
  }

  async create(s: SessionRecord, idleMs: number, maxPerToken?: number): Promise<string[]> {
    this.map.set(s.id, { s, evseq: 0, used: ++this.uses }, idleMs);
    const set = this.index(s);
    const evicted: string[] = [];
    while (maxPerToken !== undefined && maxPerToken > 0 && set.size > maxPerToken) {
      const oldest = this.leastRecentlyUsed(set, s.id);
      if (oldest === undefined) break;
      this.unindex(this.map.get(oldest)!.s);
      this.map.delete(oldest);
      this.dropped(oldest);
      evicted.push(oldest);
    }
    return evicted;
  }

  /** The live session of `ids` other than `except` used longest ago (expired ones go on the way). */
  private leastRecentlyUsed(ids: Set<string>, except: string): string | undefined {
    let oldest: string | undefined;
    let oldestUse = Infinity;
    for (const id of [...ids]) {
      const e = id === except ? undefined : this.map.get(id);
      if (e && e.used < oldestUse) {
        oldest = id;
        oldestUse = e.used;
      }
    }
    return oldest;
  }
  async touch(id: string, idleMs: number): Promise<SessionRecord | undefined> {
    return this.touchNow(id, idleMs);
  }
  touchNow(id: string, idleMs: number, now = Date.now()): SessionRecord | undefined {
    const e = this.map.renew(id, idleMs, now);
    if (!e) return undefined;
    e.s.lastSeenAt = now;
    e.used = ++this.uses;
    return e.s;
  }
  async delete(id: string): Promise<boolean> {
    const e = this.map.get(id);
    if (e) this.unindex(e.s);
    this.dropped(id);
    return this.map.delete(id);
  }
  async countForDevice(deviceId: string): Promise<number> {
    // map.get skips a session past its expiry whose timer has not fired yet.
    return this.byDevice.ids(deviceId).filter((id) => this.map.get(id) !== undefined).length;
  }
  async listForDevice(deviceId: string, limit: number): Promise<SessionRecord[]> {
    const live: SessionRecord[] = [];
    for (const id of this.byDevice.ids(deviceId)) {
      const e = this.map.get(id);
      if (e) live.push({ ...e.s });
    }
    return live.sort((a, b) => b.lastSeenAt - a.lastSeenAt).slice(0, Math.max(1, Math.floor(limit)));
  }
  async deleteWhere(match: { deviceId?: string; tokenId?: string }): Promise<number> {
    const ids = new Set([
      ...(match.deviceId ? this.byDevice.ids(match.deviceId) : []),
      ...(match.tokenId ? this.byToken.ids(match.tokenId) : []),
    ]);
    let n = 0;
    for (const id of ids) {
      const e = this.map.get(id);
      if (e) this.unindex(e.s);
      if (!this.map.delete(id)) continue;
      this.dropped(id);
      n++;
    }
    return n;
  }
  /** Next event number of a live session, with its remaining idle time and credential; undefined if there is none. */
  nextEventSeq(id: string): { seq: number; remainingMs: number; tokenId: string } | undefined {
    const e = this.map.get(id);
    const remainingMs = this.map.remainingMs(id);
    if (!e || remainingMs === undefined) return undefined;
    return { seq: ++e.evseq, remainingMs, tokenId: e.s.tokenId };
  }
}

interface ReplayBuffer {
  bytes: number;
  events: ReplayEntry[];
}

export interface LocalBusOptions {
  nodeId?: string;
  log?: Logger;
  replay?: Partial<ReplayLimits>;
  /** Replay bytes this node keeps for all sessions together, and for one credential's sessions. */
  replayBudget?: { nodeBytes?: number; credentialBytes?: number };
  /** LOCAL_BUS_BOUNDS, smaller (tests). */
  bounds?: Partial<typeof LOCAL_BUS_BOUNDS>;
}

/** Forgets `map`'s oldest entries until one more fits under `max`. */
function makeRoom<V>(map: ExpiringMap<V>, max: number, dropped: Count): void {
  while (map.size >= max) {
    const oldest = map.oldestKey();
    if (oldest === undefined) return;
    map.delete(oldest);
    dropped.inc();
  }
}

export class LocalBus implements Bus {
  readonly kind = 'local' as const;
  readonly nodeId: string;
  readonly available = true;
  readonly lastRoundTripMs = undefined;
  readonly sessions: LocalSessions;
  private readonly nonces = new ExpiringMap<string>();
  private readonly counters = new ExpiringMap<number>();
  private readonly replay = new ExpiringMap<ReplayBuffer>((_id, buf) => this.budget.forget(buf.events));
  private readonly replayLimits: ReplayLimits;
  readonly budget: ReplayBudget;
  private readonly epochs = new Map<string, number>(); // last epoch handed out per device
  private readonly owned = new Map<string, number>(); // device -> epoch of the socket held here
  private readonly devices = new Map<string, Set<(frame: string) => void>>();
  private readonly control: Handlers<[ControlEvent]>;
  private readonly nodeMessages: Handlers<[string]>;
  private readonly nodeBytes: Handlers<[Buffer, number, number]>;
  private readonly log?: Logger;
  private readonly bounds: typeof LOCAL_BUS_BOUNDS;

  constructor(opts: LocalBusOptions = {}) {
    this.nodeId = opts.nodeId ?? 'local';
    this.bounds = { ...LOCAL_BUS_BOUNDS, ...opts.bounds };
    this.log = opts.log;
    this.replayLimits = { ...DEFAULT_REPLAY, ...opts.replay };
    this.budget = new ReplayBudget(opts.replayBudget ?? {}, (e) => this.evict(e));
    this.sessions = new LocalSessions((id) => this.dropReplay(id));
    this.control = new Handlers('control', opts.log);
    this.nodeMessages = new Handlers('node message', opts.log);
    this.nodeBytes = new Handlers('node message', opts.log);
  }

  async putNonce(nonce: string, deviceId: string, ttlMs: number): Promise<void> {
    makeRoom(this.nonces, this.bounds.nonces, localBusDropped.nonce);
    this.nonces.set(nonce, deviceId, ttlMs);
  }
  async takeNonce(nonce: string): Promise<string | undefined> {
    const v = this.nonces.get(nonce);
    this.nonces.delete(nonce);
    return v;
  }
  async hit(key: string, windowMs: number): Promise<number> {
    const had = this.counters.get(key);
    const n = (had ?? 0) + 1;
    // Fixed window: the first hit opens it; later hits keep its end.
    if (n === 1) {
      if (had === undefined) makeRoom(this.counters, this.bounds.windows, localBusDropped.window);
      this.counters.set(key, n, windowMs);
    } else this.counters.update(key, n);
    return n;
  }
  async peek(key: string): Promise<number> {
    return this.counters.get(key) ?? 0;
  }
  async unhit(key: string): Promise<void> {
    const n = this.counters.get(key);
    if (n !== undefined && n > 0) this.counters.update(key, n - 1);
  }
  async mark(key: string, ttlMs: number): Promise<void> {
    if (this.counters.get(key) === undefined) makeRoom(this.counters, this.bounds.windows, localBusDropped.window);
    this.counters.set(key, 1, ttlMs);
  }
  async publishControl(event: ControlEvent): Promise<void> {
    this.control.emit(event);
  }
  onControl(handler: (event: ControlEvent) => void): void {
    this.control.add(handler);
  }

  // One node: ownership is a local map and nobody else can supersede or die.
  async claimDevice(deviceId: string): Promise<number> {
    const epoch = (this.epochs.get(deviceId) ?? 0) + 1;
    this.epochs.set(deviceId, epoch);
    this.owned.set(deviceId, epoch);
    return epoch;
  }
  async reclaimDevice(deviceId: string, epoch: number): Promise<number | undefined> {
    const cur = this.owned.get(deviceId);
    if (cur === epoch) return epoch;
    return cur === undefined ? this.claimDevice(deviceId) : undefined;
  }
  async releaseDevice(deviceId: string, epoch: number): Promise<boolean> {
    if (this.owned.get(deviceId) !== epoch) return false;
    this.owned.delete(deviceId);
    return true;
  }
  async ownerOf(deviceId: string): Promise<DeviceOwner | undefined> {
    const epoch = this.owned.get(deviceId);
    return epoch === undefined ? undefined : { nodeId: this.nodeId, epoch };
  }
  onSuperseded(): void {}
  async aliveNodes(): Promise<string[]> {
    return [this.nodeId];
  }
  othersAlive(): boolean {
    return false;
  }
  onNodeDown(): void {}

  async sendToNode(nodeId: string, head: NodeHead, payload?: Buffer): Promise<boolean> {
    if (nodeId !== this.nodeId) return false;
    const msg = String(head);
    if (!this.nodeMessages.empty) this.nodeMessages.emit(payload ? msg + payload.toString('utf8') : msg);
    if (!this.nodeBytes.empty) {
      const bytes = payload ? Buffer.concat([Buffer.from(msg), payload]) : Buffer.from(msg);
      this.nodeBytes.emit(bytes, 0, bytes.length);
    }
    return true;
  }
  async replyToNode(nodeId: string, msg: NodeHead, payload?: Buffer): Promise<void> {
    await this.sendToNode(nodeId, msg, payload);
  }
  sendOrBounce(nodeId: string, msg: NodeHead, payload: Buffer | undefined): Promise<boolean> {
    return this.sendToNode(nodeId, msg, payload);
  }
  onNodeMessage(handler: (msg: string) => void): void {
    this.nodeMessages.add(handler);
  }
  onNodeBytes(handler: (bytes: Buffer, start: number, end: number) => void): void {
    this.nodeBytes.add(handler);
  }
  async publishDevice(deviceId: string, frame: string): Promise<number> {
    const set = this.devices.get(deviceId);
    if (!set) return 0;
    for (const h of [...set]) {
      try {
        h(frame);
      } catch (err) {
        this.log?.error({ err }, 'device frame handler threw');
      }
    }
    return 1;
  }
  async subscribeDevice(deviceId: string, handler: (frame: string) => void): Promise<() => void> {
    let set = this.devices.get(deviceId);
    if (!set) this.devices.set(deviceId, (set = new Set()));
    const entry = (frame: string) => handler(frame); // distinct per call, so one handler may subscribe twice
    set.add(entry);
    return () => {
      set.delete(entry);
      if (set.size === 0 && this.devices.get(deviceId) === set) this.devices.delete(deviceId);
    };
  }

  async appendEvent(sessionId: string, streamId: string, data: string): Promise<string | undefined> {
    checkStreamId(streamId);
    const { maxEvents, maxBytes, ttlMs } = this.replayLimits;
    const live = this.sessions.nextEventSeq(sessionId);
    // No such session here (it expired or ended): nothing can resume this stream, keep nothing,
    // and give no id: the session's numbers are gone with it, a new count would repeat them.
    if (!live) return undefined;
    const buf = this.replay.get(sessionId) ?? { bytes: 0, events: [] };
    const seq = live.seq;
    const size = Buffer.byteLength(data) + Buffer.byteLength(streamId) + String(seq).length + 2;
    const entry: ReplayEntry = { seq, streamId, data, size, sessionId, tokenId: live.tokenId };
    buf.events.push(entry);
    buf.bytes += size;
    while (buf.events.length > 1 && (buf.events.length > maxEvents || buf.bytes > maxBytes)) {
      const old = buf.events.shift()!;
      buf.bytes -= old.size;
      this.budget.forget([old]);
    }
    this.replay.set(sessionId, buf, Math.min(ttlMs, live.remainingMs));
    this.budget.add(entry); // may evict older events of this or other sessions (never this one)
    return eventId(streamId, seq);
  }

  /** The node's or the credential's budget is full: its oldest event goes (always its buffer's head). */
  private evict(e: ReplayEntry): void {
    const buf = this.replay.get(e.sessionId);
    if (!buf) return;
    const i = buf.events[0] === e ? 0 : buf.events.indexOf(e);
    if (i < 0) return;
    buf.events.splice(i, 1);
    buf.bytes -= e.size;
    if (buf.events.length === 0) this.replay.delete(e.sessionId);
  }

  private dropReplay(sessionId: string): void {
    const buf = this.replay.get(sessionId);
    if (buf) this.budget.forget(buf.events);
    this.replay.delete(sessionId);
  }

  /** What the node holds: live sessions, replay buffers and their bytes (for metrics and tests). */
  stats(): { sessions: number; replayBuffers: number; replayBytes: number; nonces: number; counters: number } {
    return {
      sessions: this.sessions.size,
      replayBuffers: this.replay.size,
      replayBytes: this.budget.bytes,
      nonces: this.nonces.size,
      counters: this.counters.size,
    };
  }

  async replayAfter(sessionId: string, lastEventId: string): Promise<ReplayEvent[]> {
    const last = parseEventId(lastEventId);
    const buf = this.replay.get(sessionId);
    if (!last || !buf) return [];
    return buf.events
      .filter((e) => e.streamId === last.streamId && e.seq > last.seq)
      .map((e) => ({ id: eventId(e.streamId, e.seq), data: e.data }));
  }

  onUnavailable(): void {}
  onReconnected(): void {}
  async close(): Promise<void> {
    for (const m of [this.nonces, this.counters, this.replay]) m.close();
    this.sessions.close();
  }
}
