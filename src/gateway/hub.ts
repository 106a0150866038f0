// This node's registry: which phone sockets it holds, and which client SSE streams listen
// to which phone. Phone notifications travel through the bus's per-device channel, so a
// stream on any node hears a phone on any other; this node subscribes while it has listeners.
import type { DeviceConnection } from './device-connection.ts';
import type { Bus } from '../bus/types.ts';
import { metrics } from '../metrics.ts';
import { ExpiringMap } from '../bus/expiring-map.ts';

/**
 * How long a revocation is remembered on the node: a request authenticated just before it
 * (its credential cached) must not open a stream or start a call just after it.
 */
const REVOKED_MEMORY_MS = 60_000;

/** Whose credential a stream or call belongs to: what a revocation, removal or lock matches. */
export interface CredentialMatch {
  deviceId?: string;
  tokenId?: string;
  accountId?: string;
  sessionId?: string;
}

/**
 * Why a credential lost its right to the phone: what its calls in flight are answered
 * (`cancelled`, or `device_removed` when the phone itself was removed, the same answer the
 * phone's own node gives them: docs/PROTOCOL.md "Error codes").
 */
export type RevocationReason = 'revoked' | 'device_removed';

/** Something on this node that wants a device's notifications: a session's SSE streams. */
export interface Listener {
  sessionId: string;
  /** The credential that opened it (every client stream has one). */
  tokenId?: string;
  accountId?: string;
  deliver(frame: string | Buffer): void;
  end(): void;
  /**
   * Closes its connections but keeps buffering for their resumption (a drain: clients
   * reconnect elsewhere with Last-Event-ID); end() stops that too.
   */
  disconnect?(): void;
}

/** Something else a credential holds open on this node (a resumed POST stream). */
export interface Held {
  deviceId: string;
  tokenId: string;
  accountId: string;
  sessionId?: string;
  end(): void;
}

/** True when every field the match names is equal (an empty match matches nothing). */
export function matchesCredential(
  match: CredentialMatch,
  x: { deviceId?: string; tokenId?: string; accountId?: string; sessionId?: string },
): boolean {
  let named = false;
  for (const k of ['deviceId', 'tokenId', 'accountId', 'sessionId'] as const) {
    if (match[k] === undefined) continue;
    named = true;
    if (x[k] !== match[k]) return false;
  }
  return named;
}

interface DeviceListeners {
  set: Set<Listener>;
  subscription: Promise<() => void>;
}

export class Hub {
  private readonly devices = new Map<string, DeviceConnection>();
  private readonly listeners = new Map<string, DeviceListeners>();
  /** Sockets being handed over to other nodes (drain): no new work starts on them. */
  private readonly moving = new WeakSet<DeviceConnection>();
  private readonly held = new Set<Held>();
  /** Client streams on this node per key, oldest first. */
  private readonly keyStreams = new Map<string, Set<{ end(): void }>>();
  private readonly revokeHandlers: Array<(match: CredentialMatch, reason: RevocationReason) => void> = [];
  private readonly attachHandlers: Array<(conn: DeviceConnection) => void> = [];
  private readonly revoked = new ExpiringMap<true>();

  constructor(private readonly bus: Bus) {}

  device(deviceId: string): DeviceConnection | undefined {
    return this.devices.get(deviceId);
  }

  /** Registers a new socket; returns the one it supersedes, if any. */
  attach(conn: DeviceConnection): DeviceConnection | undefined {
    const old = this.devices.get(conn.deviceId);
    this.devices.set(conn.deviceId, conn);
    metrics.devicesConnected.set(this.devices.size);
    for (const h of this.attachHandlers) h(conn);
    return old === conn ? undefined : old;
  }

  /** Called when a phone socket registers on this node (its claim on the bus follows: `conn.claim`). */
  onAttach(handler: (conn: DeviceConnection) => void): void {
    this.attachHandlers.push(handler);
  }

  /** Forgets a socket, unless a newer one already replaced it. */
  detach(conn: DeviceConnection): void {
    if (this.devices.get(conn.deviceId) === conn) this.devices.delete(conn.deviceId);
    metrics.devicesConnected.set(this.devices.size);
  }

  markMoving(conn: DeviceConnection): void {
    this.moving.add(conn);
  }

  isMoving(conn: DeviceConnection): boolean {
    return this.moving.has(conn);
  }

  connections(): IterableIterator<DeviceConnection> {
    return this.devices.values();
  }

  get deviceCount(): number {
    return this.devices.size;
  }

  /** A phone notification, published for every node with a listening stream. */
  publish(deviceId: string, frame: Buffer): void {
    void this.bus.publishDevice(deviceId, frame.toString('utf8')).catch(() => {});
  }

  /** Adds a stream once the node hears the device's channel; resolves with its remover. */
  async listen(deviceId: string, l: Listener): Promise<() => void> {
    let entry = this.listeners.get(deviceId);
    if (!entry) {
      entry = {
        set: new Set(),
        subscription: this.bus.subscribeDevice(deviceId, (frame) => this.fanOut(deviceId, frame)),
      };
      this.listeners.set(deviceId, entry);
    }
    const mine = entry;
    mine.set.add(l);
    let removed = false;
    const remove = () => {
      if (removed) return;
      removed = true;
      mine.set.delete(l);
      if (mine.set.size === 0 && this.listeners.get(deviceId) === mine) {
        this.listeners.delete(deviceId);
        void mine.subscription.then(
          (unsubscribe) => unsubscribe(),
          () => {},
        );
      }
    };
    try {
      await mine.subscription;
    } catch (err) {
      remove();
      throw err;
    }
    return remove;
  }

  /** Sends a phone notification to every listening stream of that device on this node. */
  fanOut(deviceId: string, frame: string | Buffer): number {
    const entry = this.listeners.get(deviceId);
    if (!entry) return 0;
    for (const l of entry.set) l.deliver(frame);
    return entry.set.size;
  }

  /** Ends the streams of one session (DELETE) or of a whole device (removed). */
  endStreams(match: { deviceId: string; sessionId?: string }): void {
    const entry = this.listeners.get(match.deviceId);
    if (!entry) return;
    for (const l of [...entry.set]) if (!match.sessionId || l.sessionId === match.sessionId) l.end();
  }

  /**
   * Counts a client stream against its key on this node; beyond `max` the key's oldest stream
   * is ended through its `end` (a GET's client may resume it; a listen stream's end writes the
   * listen request's result first: StatelessEndpoint.listen). Returns the remover, for when the
   * stream closes.
   */
  admitStream(tokenId: string, max: number, stream: { end(): void }): () => void {
    let set = this.keyStreams.get(tokenId);
    if (!set) this.keyStreams.set(tokenId, (set = new Set()));
    set.add(stream);
    const mine = set;
    while (mine.size > max) {
      const oldest = mine.values().next().value!;
      if (oldest === stream) break;
      mine.delete(oldest);
      oldest.end();
    }
    return () => {
      mine.delete(stream);
      if (mine.size === 0 && this.keyStreams.get(tokenId) === mine) this.keyStreams.delete(tokenId);
    };
  }

  /** True when the credential (its key, device or account) was revoked on this node lately. */
  isRevoked(who: { tokenId?: string; deviceId?: string; accountId?: string }): boolean {
    if (this.revoked.size === 0) return false; // the common case, on every call: no keys built
    return revokedKeys(who).some((k) => this.revoked.has(k));
  }

  /** An account unlocked: its credentials are valid again. */
  forgive(match: { accountId: string }): void {
    this.revoked.delete(`a:${match.accountId}`);
  }

  close(): void {
    this.revoked.close();
  }

  /** Registers something a credential holds open, so a revocation can end it; returns its remover. */
  hold(h: Held): () => void {
    this.held.add(h);
    return () => this.held.delete(h);
  }

  /** Runs on every revocation, removal or lock applied on this node (calls in flight, caches). */
  onRevoke(handler: (match: CredentialMatch, reason: RevocationReason) => void): void {
    this.revokeHandlers.push(handler);
  }

  /**
   * A credential (or a whole device, or account) lost its right to the phone: every stream it
   * holds open on this node ends, and every onRevoke handler runs. Returns how many streams ended.
   */
  revoke(match: CredentialMatch, reason: RevocationReason = 'revoked'): number {
    let ended = 0;
    if (match.sessionId === undefined) for (const k of revokedKeys(match)) this.revoked.set(k, true, REVOKED_MEMORY_MS);
    for (const [deviceId, entry] of [...this.listeners]) {
      for (const l of [...entry.set]) {
        if (
          matchesCredential(match, { deviceId, tokenId: l.tokenId, accountId: l.accountId, sessionId: l.sessionId })
        ) {
          l.end();
          ended++;
        }
      }
    }
    for (const h of [...this.held]) {
      if (!matchesCredential(match, h)) continue;
      this.held.delete(h);
      h.end();
      ended++;
    }
    for (const f of this.revokeHandlers) f(match, reason);
    return ended;
  }

  allStreams(): Listener[] {
    return [...this.listeners.values()].flatMap((e) => [...e.set]);
  }
}

function revokedKeys(m: { tokenId?: string; deviceId?: string; accountId?: string }): string[] {
  const keys: string[] = [];
  if (m.tokenId !== undefined) keys.push(`t:${m.tokenId}`);
  if (m.deviceId !== undefined) keys.push(`d:${m.deviceId}`);
  if (m.accountId !== undefined) keys.push(`a:${m.accountId}`);
  return keys;
}
