// One structured logger. Method names, sizes, ids and latency only: never message content or secrets.
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
    redact: {
      paths: ['token', 'code', 'authorization', 'headers.authorization', 'headers["x-api-key"]'],
      remove: true,
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
