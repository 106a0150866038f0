// Releases of phone claims. One the bus could not take (the phone left while Redis was down) is
// kept, and tried again when the bus is back, before the node reclaims its sockets: else the
// node would stay named the phone's owner as long as it lives, and every node would keep
// sending the phone's calls to a node that does not hold it. Compare-and-delete, so a claim
// taken since (the phone back on another node, or on this one) is not touched.
import type { Bus } from '../bus/types.ts';
import { BusUnavailableError } from '../bus/index.ts';
import type { Logger } from '../log.ts';

/**
 * Failed releases kept at most, the oldest forgotten first (memory, not correctness: such a
 * claim then lasts until this node leaves the cluster or is reaped).
 */
export const PENDING_RELEASES_MAX = 100_000;

export class DeviceReleases {
  /** deviceId → the epoch whose release failed, oldest first. */
  private readonly pending = new Map<string, number>();

  constructor(
    private readonly bus: Bus,
    private readonly log: Logger,
  ) {}

  /** Releases the claim; kept for `retry` if the bus could not be reached. */
  async release(deviceId: string, epoch: number): Promise<void> {
    try {
      await this.bus.releaseDevice(deviceId, epoch);
    } catch (err) {
      if (!(err instanceof BusUnavailableError)) throw err;
      this.pending.delete(deviceId); // re-inserted: the newest last
      this.pending.set(deviceId, epoch);
      if (this.pending.size > PENDING_RELEASES_MAX) this.pending.delete(this.pending.keys().next().value!);
    }
  }

  /**
   * Releases the claim a closed (or closing) socket holds: the epoch it holds now, which
   * reclaimAll (src/gateway/node.ts) may have renewed after an outage, else its first claim's
   * once known.
   */
  async releaseHeld(conn: { deviceId: string; epoch?: number; claim?: Promise<number | undefined> }): Promise<void> {
    const epoch = conn.epoch ?? (await conn.claim);
    if (epoch !== undefined) await this.release(conn.deviceId, epoch);
  }

  /** The phone claimed again on this node: its new claim replaces the one left to release. */
  forget(deviceId: string): void {
    if (this.pending.size > 0) this.pending.delete(deviceId);
  }

  /** Releases waiting for the bus. */
  get size(): number {
    return this.pending.size;
  }

  /** The bus is back: tries each kept release again; one that fails again stays for the next time. */
  async retry(): Promise<void> {
    if (this.pending.size === 0) return;
    const todo = [...this.pending];
    let released = 0;
    await Promise.all(
      todo.map(async ([deviceId, epoch]) => {
        try {
          if (await this.bus.releaseDevice(deviceId, epoch)) released++;
        } catch (err) {
          if (err instanceof BusUnavailableError) return; // down again: kept
          this.log.warn({ deviceId, err: String(err) }, 'release after the outage failed');
        }
        if (this.pending.get(deviceId) === epoch) this.pending.delete(deviceId);
      }),
    );
    this.log.info(
      { tried: todo.length, released, left: this.pending.size },
      'releases kept through the outage retried',
    );
  }
}
