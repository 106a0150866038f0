// One structured logger. Method names, sizes, ids and latency only: never message content or secrets.
import process from 'node:process';
import { pino, type Logger } from 'pino';

export type { Logger };

/** `destination`: where the JSON lines go (stdout by default; tests capture them). */
export function createLogger(
  opts: { level?: string; name?: string; destination?: { write(line: string): void } } = {},
): Logger {
  const options = {
    name: opts.name ?? 'phonebridge',
    level: opts.level ?? process.env.PHONEBRIDGE_LOG_LEVEL ?? 'info',
    base: undefined,
    // Secrets by field name, wherever a line might carry one: `code` is a pairing, enrollment or
    // OAuth authorization code, so a line that means another code names it otherwise
    // (`closeCode`: src/gateway/device-socket.ts).
    redact: {
      paths: ['token', 'code', 'authorization', 'headers.authorization', 'headers["x-api-key"]'],
      remove: true,
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** pino's debug level as a number: `log.levelVal > DEBUG_LEVEL` is a cheap `!isLevelEnabled('debug')`. */
export const DEBUG_LEVEL = pino.levels.values.debug;

/** The longest client-supplied value (a header) that goes into a log line. */
export const MAX_LOGGED_VALUE = 128;

/** A client-supplied value as a log line may carry it: cut at MAX_LOGGED_VALUE, with its length. */
export function logValue(v: string | undefined): string | undefined {
  if (v === undefined || v.length <= MAX_LOGGED_VALUE) return v;
  return `${v.slice(0, MAX_LOGGED_VALUE)}…(${v.length} chars)`;
}

/**
 * At most `limit` lines per fixed window, for lines anyone on the internet can cause (rejected
 * upgrades). `take()` is undefined for a line to drop, or how many were dropped before this one.
 */
export class LogThrottle {
  private windowStart = -Infinity;
  private used = 0;
  private dropped = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  take(): number | undefined {
    const t = this.now();
    if (t - this.windowStart >= this.windowMs) {
      this.windowStart = t;
      this.used = 0;
    }
    if (this.used >= this.limit) {
      this.dropped++;
      return undefined;
    }
    this.used++;
    const dropped = this.dropped;
    this.dropped = 0;
    return dropped;
  }
}
