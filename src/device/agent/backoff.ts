// Reconnect delays: capped exponential backoff with full jitter,
//   delay(n) = random in [0, min(capMs, startMs · 2^n)],
// so a thousand phones dropped at once by a relay restart come back spread out, not in lockstep.
//
// Defaults: baseMs 500, capMs 30 000, dropWindowMs 5 000, resetAfterMs 60 000.
// - Failed attempts at start-up retry after [0, 0.5 s], [0, 1 s], [0, 2 s] … up to [0, 30 s] (startMs = baseMs).
// - When a live connection drops, the sequence restarts from dropWindowMs instead: [0, 5 s], [0, 10 s] …
//   Every phone on that relay dropped at the same instant; 0.5 s would bring the whole fleet back
//   in one burst (at 5 s, 1,000 phones average 20 per 100 ms).
// - A connection that stayed up resetAfterMs was healthy and restarts the sequence; one that keeps
//   dropping sooner keeps widening it, so a flapping phone backs off too.

export interface BackoffOptions {
  baseMs?: number;
  capMs?: number;
  /** Uptime after which a dropped connection restarts the sequence. */
  resetAfterMs?: number;
  /** The first window after a live connection drops (instead of baseMs). */
  dropWindowMs?: number;
  /** Uniform in [0, 1); injectable for tests and simulations. */
  random?: () => number;
  now?: () => number;
}

export const BACKOFF_DEFAULTS = { baseMs: 500, capMs: 30_000, dropWindowMs: 5_000, resetAfterMs: 60_000 } as const;

export class Backoff {
  readonly baseMs: number;
  readonly capMs: number;
  readonly resetAfterMs: number;
  readonly dropWindowMs: number;
  private readonly random: () => number;
  private readonly now: () => number;
  /** Attempts since the sequence (re)started; the window is startMs · 2^attempt. */
  attempt = 0;
  /** baseMs at start-up, dropWindowMs once a live connection has dropped. */
  startMs: number;
  private connectedAt: number | undefined;

  constructor(opts: BackoffOptions = {}) {
    this.baseMs = opts.baseMs ?? BACKOFF_DEFAULTS.baseMs;
    this.capMs = opts.capMs ?? BACKOFF_DEFAULTS.capMs;
    this.resetAfterMs = opts.resetAfterMs ?? BACKOFF_DEFAULTS.resetAfterMs;
    this.dropWindowMs = opts.dropWindowMs ?? BACKOFF_DEFAULTS.dropWindowMs;
    this.random = opts.random ?? Math.random;
    this.now = opts.now ?? Date.now;
    this.startMs = this.baseMs;
  }

  /** The upper bound of the next delay. */
  window(): number {
    return Math.min(this.capMs, this.startMs * 2 ** this.attempt);
  }

  /** The delay before the next attempt; each call widens the window until the cap. */
  next(): number {
    const delay = Math.floor(this.random() * this.window());
    this.attempt++;
    return delay;
  }

  /** A uniform delay in [0, maxMs), for the prompt reconnect after a relay drains (1012). */
  jitter(maxMs: number): number {
    return Math.floor(this.random() * maxMs);
  }

  connected(): void {
    this.connectedAt = this.now();
  }

  /** A live connection dropped: restart if it had been healthy, and never retry sooner than dropWindowMs allows. */
  dropped(): void {
    if (this.connectedAt !== undefined && this.now() - this.connectedAt >= this.resetAfterMs) this.reset();
    this.connectedAt = undefined;
    if (this.window() < Math.min(this.dropWindowMs, this.capMs)) {
      this.startMs = this.dropWindowMs;
      this.attempt = 0;
    }
  }

  reset(): void {
    this.startMs = this.baseMs;
    this.attempt = 0;
    this.connectedAt = undefined;
  }
}
