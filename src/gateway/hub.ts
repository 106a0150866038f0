// This node's registry: which phone sockets it holds, and which client SSE streams listen
// to which phone. Nothing here crosses the node boundary; the bus does that.
import type { DeviceConnection } from './device-connection.ts';
import type { SseStream } from './sse.ts';
import { metrics } from '../metrics.ts';

export interface Listener {
  sessionId: string;
  stream: SseStream;
}

export class Hub {
  private readonly devices = new Map<string, DeviceConnection>();
  private readonly listeners = new Map<string, Set<Listener>>();

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

  connections(): IterableIterator<DeviceConnection> {
    return this.devices.values();
  }

  get deviceCount(): number {
    return this.devices.size;
  }

  listen(deviceId: string, l: Listener): () => void {
    let set = this.listeners.get(deviceId);
    if (!set) this.listeners.set(deviceId, (set = new Set()));
    set.add(l);
    metrics.sseStreams.inc();
    return () => {
      if (set!.delete(l)) metrics.sseStreams.dec();
      if (set!.size === 0 && this.listeners.get(deviceId) === set) this.listeners.delete(deviceId);
    };
  }

  /** Sends a phone notification to every listening stream of that device on this node. */
  fanOut(deviceId: string, frame: Buffer): number {
    const set = this.listeners.get(deviceId);
    if (!set) return 0;
    for (const l of set) l.stream.send(frame);
    return set.size;
  }

  /** Ends the streams of one session (DELETE) or of a whole device (removed). */
  endStreams(match: { deviceId: string; sessionId?: string }): void {
    const set = this.listeners.get(match.deviceId);
    if (!set) return;
    for (const l of [...set]) if (!match.sessionId || l.sessionId === match.sessionId) l.stream.end();
  }

  allStreams(): Listener[] {
    return [...this.listeners.values()].flatMap((s) => [...s]);
  }
}
