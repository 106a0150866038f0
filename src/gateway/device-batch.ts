// The store work of phone accepts, shared between accepts (docs/decisions/0140-cheaper-device-accepts.md):
// key lookups that arrive while one is in flight go together in the next query, and last-seen
// times and initialize results are written together a moment later. A reconnect storm of
// thousands of phones then costs the store tens of statements, not two per phone.
import type { DeviceKey, DeviceSeen, RemovedDevice, Store } from '../store/types.ts';
import type { Logger } from '../log.ts';

/** Most ids in one lookup or rows in one write (well under Postgres' parameter and statement limits). */
export const MAX_BATCH = 500;
/** How long a last-seen write waits for others to join it. */
export const SEEN_DELAY_MS = 50;

type Waiter = { resolve(v: DeviceKey | RemovedDevice | undefined): void; reject(e: unknown): void };

/**
 * getDeviceKeys for one id at a time, batched: the first lookup goes out at the end of its
 * turn; lookups that arrive while it runs wait for it and go in one query after it. An idle
 * node answers as soon as one query can; a busy one sends fewer, larger queries. Ids it did
 * not find are looked up among removed devices in a second query of the same batch (only a
 * batch with such ids pays for it): a removed device's key comes back with `removedAt`
 * (docs/decisions/0230-removed-devices-are-remembered.md).
 */
export class DeviceKeyLookup {
  private queue = new Map<string, Waiter[]>();
  private running = false;
  private scheduled = false;
  /** Queries sent and ids looked up so far (load reports: the batch size is their ratio). */
  readonly counts = { queries: 0, ids: 0 };

  constructor(private readonly store: Pick<Store, 'getDeviceKeys' | 'getRemovedDevices'>) {}

  get(id: string): Promise<DeviceKey | RemovedDevice | undefined> {
    return new Promise((resolve, reject) => {
      const waiters = this.queue.get(id);
      if (waiters) waiters.push({ resolve, reject });
      else this.queue.set(id, [{ resolve, reject }]);
      if (!this.running && !this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.run());
      }
    });
  }

  private async run(): Promise<void> {
    this.scheduled = false;
    this.running = true;
    try {
      while (this.queue.size > 0) {
        const batch = new Map<string, Waiter[]>();
        for (const [id, w] of this.queue) {
          if (batch.size >= MAX_BATCH) break;
          batch.set(id, w);
        }
        for (const id of batch.keys()) this.queue.delete(id);
        this.counts.queries++;
        this.counts.ids += batch.size;
        try {
          const found = await this.store.getDeviceKeys([...batch.keys()]);
          const missing: string[] = [];
          for (const [id, ws] of batch) {
            const key = found.get(id);
            if (key) for (const w of ws) w.resolve(key);
            else missing.push(id);
          }
          if (missing.length > 0) {
            const removed = await this.store.getRemovedDevices(missing);
            for (const id of missing) for (const w of batch.get(id)!) w.resolve(removed.get(id));
          }
        } catch (err) {
          // Lookups already answered keep their answer (a settled promise ignores this).
          for (const ws of batch.values()) for (const w of ws) w.reject(err);
        }
      }
    } finally {
      this.running = false;
    }
  }
}

/**
 * Last-seen times (connect, disconnect) and initialize results, in one statement per batch,
 * one statement at a time. Initialize results go at the end of their turn (other nodes read
 * them for a phone they do not hold: src/gateway/mcp-stateless.ts), last-seen times alone
 * SEEN_DELAY_MS later; whatever arrives while a statement runs goes in the next one, so a
 * storm still batches. A failed write is logged and dropped, as single writes were:
 * last-seen is informational and the next connect writes both again.
 */
export class DeviceSeenWriter {
  private pending: DeviceSeen[] = [];
  private timer?: NodeJS.Timeout;
  /** When the scheduled write goes: soon (an initialize result waits) or after the delay. */
  private soon = false;
  private writing?: Promise<void>;
  /** Statements sent and rows in them so far (load reports). */
  readonly counts = { writes: 0, rows: 0 };

  constructor(
    private readonly store: Pick<Store, 'recordDevicesSeen'>,
    private readonly log: Logger,
    private readonly delayMs = SEEN_DELAY_MS,
  ) {}

  /** With `initResult` (even null) it is stored too; without, the stored one is kept. */
  seen(id: string, seenAt: Date, ...initResult: [] | [unknown]): void {
    this.pending.push(initResult.length ? { id, seenAt, initResult: initResult[0] } : { id, seenAt });
    this.schedule(initResult.length > 0);
  }

  private schedule(soon: boolean): void {
    if (this.writing) return; // its end schedules what waits
    if (this.timer && (this.soon || !soon)) return;
    clearTimeout(this.timer);
    this.soon = soon;
    this.timer = setTimeout(() => void this.write(), soon ? 0 : this.delayMs);
  }

  /** Writes whatever is waiting now, and resolves once nothing is (node shutdown, tests). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.writing || this.pending.length > 0) {
      if (this.writing) await this.writing;
      else await this.write();
    }
  }

  private write(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending.splice(0, MAX_BATCH);
    this.counts.writes++;
    this.counts.rows += batch.length;
    this.writing = this.store
      .recordDevicesSeen(batch)
      .catch((err) => this.log.warn({ devices: batch.length, err: String(err) }, 'could not record devices seen'))
      .finally(() => {
        this.writing = undefined;
        // What arrived during the write goes in the next one.
        if (this.pending.length > 0) this.schedule(this.pending.some((e) => 'initResult' in e));
      });
    return this.writing;
  }
}
