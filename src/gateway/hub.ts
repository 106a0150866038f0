// This node's registry: which phone sockets it holds, and which client SSE streams listen
// to which phone. Phone notifications travel through the bus's per-device channel, so a
// stream on any node hears a phone on any other; this node subscribes while it has listeners.
import type { DeviceConnection } from './device-connection.ts';
import type { Bus } from '../bus/types.ts';
import { metrics } from '../metrics.ts';

/** Something on this node that wants a device's notifications: a session's SSE streams. */
export interface Listener {
  sessionId: string;
  deliver(frame: string | Buffer): void;
  end(): void;
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

  constructor(private readonly bus: Bus) {}

  device(deviceId: string): DeviceConnection | undefined {
    return this.devices.get(deviceId);
  }

  /** Registers a new socket; returns the one it supersedes, if any. */
  attach(conn: DeviceConnection): DeviceConnection | undefined {
    const old = this.devices.get(conn.deviceId);
    this.devices.set(conn.deviceId, conn);
    metrics.devicesConnected.set(this.devices.size);
    return old === conn ? undefined : old;
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
    metrics.sseStreams.inc();
    let removed = false;
    const remove = () => {
      if (removed) return;
      removed = true;
      if (mine.set.delete(l)) metrics.sseStreams.dec();
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

  allStreams(): Listener[] {
    return [...this.listeners.values()].flatMap((e) => [...e.set]);
  }
}
