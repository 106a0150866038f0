// A map whose entries expire on time, not on the next write: a min-heap of deadlines and one
// timer armed for the earliest, so each expiry costs O(log n) and a sweep visits only what
// expired. The timer is unref'd (it never keeps a process alive) and close() stops it.

interface Entry<V> {
  value: V;
  expiresAt: number;
  /** The deadline of this entry's live node in the heap (a later renewal re-queues it lazily). */
  queuedAt: number;
}

interface Node {
  key: string;
  at: number;
}

/** Expiry runs at most this often: entries due within one tick go together. */
const MIN_TICK_MS = 50;
/**
 * The longest delay setTimeout takes: a longer one fires after 1 ms (Node warns), which for an
 * entry due in weeks (the request-id block counter) made the timer spin. Expiry re-arms.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class ExpiringMap<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private heap: Node[] = [];
  private timer?: NodeJS.Timeout;
  private timerAt = Infinity;
  private closed = false;

  /** `onExpire` runs for each entry that expired (not for delete or replacement). */
  constructor(private readonly onExpire?: (key: string, value: V) => void) {}

  get size(): number {
    return this.entries.size;
  }

  /** Deadlines queued (live ones plus lingering ones of renewed or deleted entries; ≤ 2 × size + 1024). */
  get queued(): number {
    return this.heap.length;
  }

  /** The oldest key still held (insertion order), for callers that cap the size. */
  oldestKey(): string | undefined {
    return this.entries.keys().next().value;
  }

  get(key: string, now = Date.now()): V | undefined {
    return this.live(key, now)?.value;
  }

  has(key: string, now = Date.now()): boolean {
    return this.get(key, now) !== undefined;
  }

  set(key: string, value: V, ttlMs: number, now = Date.now()): void {
    const expiresAt = now + ttlMs;
    const e = this.entries.get(key);
    if (e && e.expiresAt > now) {
      e.value = value;
      e.expiresAt = expiresAt;
      // A later deadline is found when the old node comes up; only an earlier one needs a node.
      if (expiresAt < e.queuedAt) this.queue(key, e, expiresAt);
      return;
    }
    const fresh: Entry<V> = { value, expiresAt, queuedAt: expiresAt };
    this.entries.set(key, fresh);
    this.queue(key, fresh, expiresAt);
  }

  /**
   * The live value, its expiry moved to `now + ttlMs`: get then set of the same value in one
   * lookup (a session touched on every call). Undefined, as get, for a missing or expired key.
   */
  renew(key: string, ttlMs: number, now = Date.now()): V | undefined {
    const e = this.live(key, now);
    if (!e) return undefined;
    const expiresAt = now + ttlMs;
    e.expiresAt = expiresAt;
    if (expiresAt < e.queuedAt) this.queue(key, e, expiresAt);
    return e.value;
  }

  /** Replaces the value and keeps the expiry. */
  update(key: string, value: V): void {
    const e = this.entries.get(key);
    if (e) e.value = value;
  }

  delete(key: string): boolean {
    return this.entries.delete(key);
  }

  /** Live and not yet swept entries, in insertion order. */
  *values(): IterableIterator<[string, { value: V; expiresAt: number }]> {
    for (const [k, e] of this.entries) yield [k, e];
  }

  remainingMs(key: string, now = Date.now()): number | undefined {
    const e = this.entries.get(key);
    return e && e.expiresAt > now ? e.expiresAt - now : undefined;
  }

  /** The entry of `key` if it has not expired by `now`; an expired one goes at once (onExpire). */
  private live(key: string, now: number): Entry<V> | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= now) {
      this.entries.delete(key);
      this.onExpire?.(key, e.value);
      return undefined;
    }
    return e;
  }

  /** Removes every entry due by `now`, earliest first; returns how many went. Runs on its own timer too. */
  expire(now = Date.now()): number {
    let n = 0;
    while (this.heap.length > 0 && this.heap[0].at <= now) {
      const node = this.pop();
      const e = this.entries.get(node.key);
      if (!e || e.queuedAt !== node.at) continue; // deleted, replaced, or superseded by an earlier node
      if (e.expiresAt <= now) {
        this.entries.delete(node.key);
        n++;
        this.onExpire?.(node.key, e.value);
      } else {
        this.queue(node.key, e, e.expiresAt, false); // renewed since: its turn comes later
      }
    }
    this.arm(now);
    return n;
  }

  /** Stops the timer; the map still answers, expiring lazily on reads. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private queue(key: string, e: Entry<V>, at: number, arm = true): void {
    e.queuedAt = at;
    this.push({ key, at });
    // Nodes of deleted or renewed entries linger until their deadline: rebuild when they dominate.
    if (this.heap.length > 2 * this.entries.size + 1024) this.rebuild();
    if (arm) this.arm(Date.now());
  }

  private rebuild(): void {
    this.heap = [];
    for (const [key, e] of this.entries) {
      e.queuedAt = e.expiresAt;
      this.heap.push({ key, at: e.expiresAt });
    }
    for (let i = (this.heap.length >> 1) - 1; i >= 0; i--) this.down(i);
  }

  private arm(now: number): void {
    if (this.closed || this.heap.length === 0) return;
    const at = Math.max(this.heap[0].at, now + MIN_TICK_MS);
    if (this.timer && at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Infinity;
        this.expire();
      },
      Math.min(at - now, MAX_TIMER_MS),
    );
    this.timer.unref();
  }

  private push(node: Node): void {
    const h = this.heap;
    h.push(node);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent].at <= h[i].at) break;
      [h[parent], h[i]] = [h[i], h[parent]];
      i = parent;
    }
  }

  private pop(): Node {
    const h = this.heap;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      this.down(0);
    }
    return top;
  }

  private down(i: number): void {
    const h = this.heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && h[l].at < h[m].at) m = l;
      if (r < h.length && h[r].at < h[m].at) m = r;
      if (m === i) return;
      [h[m], h[i]] = [h[i], h[m]];
      i = m;
    }
  }
}
