// Liveness from the phone's side (docs/decisions/0012-idle-tracking-beyond-uws.md): WebSocket ping frames at an adaptive
// interval between 1 and 10 minutes. Each pong in time stretches the interval (fewer wake-ups on
// a healthy path); a missed pong means the path is dead (often a NAT that forgot us), so the socket
// is terminated to reconnect and the interval starts short again. The relay gives up after
// 25 minutes of silence, so the 10-minute ceiling leaves room for a lost ping.
// One Pinger lives across sockets: what it learnt about the path survives an ordinary reconnect.

export interface PingOptions {
  /** First and fallback interval. Default 60 000 (1 min). */
  initialMs?: number;
  /** Ceiling. Default 600 000 (10 min). */
  maxMs?: number;
  /** Factor applied after each pong in time. Default 1.5. */
  growth?: number;
  /** How long to wait for the pong before declaring the socket dead. Default 30 000. */
  pongTimeoutMs?: number;
}

export const PING_DEFAULTS = { initialMs: 60_000, maxMs: 600_000, growth: 1.5, pongTimeoutMs: 30_000 } as const;

/** The part of a `ws` WebSocket the pinger uses. */
export interface PingableSocket {
  ping(): void;
  terminate(): void;
  on(event: 'pong', listener: () => void): unknown;
  off(event: 'pong', listener: () => void): unknown;
}

export class Pinger {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly growth: number;
  readonly pongTimeoutMs: number;
  /** The wait before the next ping. */
  intervalMs: number;

  constructor(
    opts: PingOptions = {},
    private readonly onMissedPong: (waitedMs: number) => void = () => {},
  ) {
    this.initialMs = opts.initialMs ?? PING_DEFAULTS.initialMs;
    this.maxMs = opts.maxMs ?? PING_DEFAULTS.maxMs;
    this.growth = opts.growth ?? PING_DEFAULTS.growth;
    this.pongTimeoutMs = opts.pongTimeoutMs ?? PING_DEFAULTS.pongTimeoutMs;
    this.intervalMs = this.initialMs;
  }

  /** Starts pinging `socket`; returns the function that stops it (call it when the socket closes). */
  attach(socket: PingableSocket): () => void {
    let nextPing: NodeJS.Timeout | undefined;
    let pongDeadline: NodeJS.Timeout | undefined;

    const schedule = () => {
      nextPing = setTimeout(sendPing, this.intervalMs);
      nextPing.unref?.();
    };
    const sendPing = () => {
      pongDeadline = setTimeout(missed, this.pongTimeoutMs);
      pongDeadline.unref?.();
      try {
        socket.ping();
      } catch {
        // not open any more: the close handler detaches us
      }
    };
    const onPong = () => {
      if (pongDeadline === undefined) return; // unsolicited pong
      clearTimeout(pongDeadline);
      pongDeadline = undefined;
      this.intervalMs = Math.min(this.maxMs, Math.round(this.intervalMs * this.growth));
      schedule();
    };
    const missed = () => {
      pongDeadline = undefined;
      this.intervalMs = this.initialMs;
      socket.off('pong', onPong);
      this.onMissedPong(this.pongTimeoutMs);
      socket.terminate();
    };

    socket.on('pong', onPong);
    schedule();
    return () => {
      clearTimeout(nextPing);
      clearTimeout(pongDeadline);
      socket.off('pong', onPong);
    };
  }
}
