// Allocation requests that wait for a phone (`wait_s`, docs/decisions/0177-allocation-wait.md):
// woken by what can free or bring a phone — a release on any node, a revocation or removal
// (their allocations go with them), a phone coming online on any node — and, for expiries, by
// a timer at the next expiry the store knows. Nothing polls the store in a loop: the one timed
// re-check is a bounded fallback for an announcement lost with a bus outage.
import type { GatewayContext } from '../gateway/context.ts';
import type { DeviceConnection } from '../gateway/device-connection.ts';

/** The feature name on the bus's control channel (ControlEvent `feature`). */
export const FLEET_EVENTS = 'fleet';
/** Online announcements of one node are sent at most this often, per account. */
const ONLINE_COALESCE_MS = 100;

export class PoolWaiters {
  /** Changes so far; an account's generation is the number of the last change that concerned it. */
  private changes = 0;
  private lastForAll = 0;
  private readonly lastFor = new Map<string, number>();
  private readonly waiting = new Map<string, Set<() => void>>();

  /** The account's pool generation: read it before looking for a phone, pass it to wait(). */
  generation(accountId: string): number {
    return Math.max(this.lastFor.get(accountId) ?? 0, this.lastForAll);
  }

  /** Something in the account's pool (or, without an account, in any pool) may have changed. */
  wake(accountId?: string): void {
    this.changes++;
    if (accountId === undefined) this.lastForAll = this.changes;
    else this.lastFor.set(accountId, this.changes);
    for (const a of accountId === undefined ? [...this.waiting.keys()] : [accountId]) {
      const set = this.waiting.get(a);
      if (!set) continue;
      this.waiting.delete(a);
      for (const fn of set) fn();
    }
  }

  /**
   * Resolves when the account's pool changes after generation `seen` (at once if it already
   * has), or after `ms`. So a release between the look and the wait is never missed.
   */
  wait(accountId: string, seen: number, ms: number): Promise<void> {
    if (this.generation(accountId) !== seen || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      let set = this.waiting.get(accountId);
      if (!set) this.waiting.set(accountId, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.waiting.get(accountId) === set) this.waiting.delete(accountId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  /** Waiting requests on this node (tests, metrics). */
  get size(): number {
    let n = 0;
    for (const s of this.waiting.values()) n += s.size;
    return n;
  }

  close(): void {
    this.wake();
  }
}

const byContext = new WeakMap<GatewayContext, PoolWaiters>();

/** This node's waiters, wired to the bus and the hub (once per node, at the feature's start). */
export function startPoolWaiters(ctx: GatewayContext): PoolWaiters {
  const waiters = new PoolWaiters();
  byContext.set(ctx, waiters);
  ctx.bus.onControl((e) => {
    if (e.type === 'feature' && e.feature === FLEET_EVENTS) waiters.wake(e.data.accountId);
  });
  // A revoked key, a removed phone, a locked account: allocations may have gone with them.
  ctx.hub.onRevoke(() => waiters.wake());
  const online = new Set<string>();
  let flush: NodeJS.Timeout | undefined;
  ctx.hub.onAttach((conn: DeviceConnection) => {
    // Announced once the claim is on the bus, so a waiter woken on another node sees the phone online.
    void Promise.resolve()
      .then(() => conn.claim)
      .then(() => {
        online.add(conn.accountId);
        flush ??= setTimeout(() => {
          flush = undefined;
          for (const accountId of online) announce(ctx, { event: 'online', accountId });
          online.clear();
        }, ONLINE_COALESCE_MS);
      });
  });
  return waiters;
}

export function poolWaiters(ctx: GatewayContext): PoolWaiters | undefined {
  return byContext.get(ctx);
}

/** Tells every node (this one included, through the bus) that the account's pool changed. */
export function announce(ctx: GatewayContext, data: { event: 'freed' | 'online'; accountId: string }): void {
  void ctx.bus.publishControl({ type: 'feature', feature: FLEET_EVENTS, data }).catch(() => {});
}
