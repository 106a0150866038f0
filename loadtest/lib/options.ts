// The command line shared by every scenario (fixed: outside checks use it):
//   npm run loadtest -- <scenario> [--duration S] [--out DIR] [--threshold 'EXPR']… [--target URL]
//                      [--phones N] [--time-scale F] [--redis-url URL]… [--from REV]
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parseThreshold, type Threshold } from './thresholds.ts';

export interface CommonOptions {
  scenario: string;
  /** Seconds; undefined: the scenario's default. */
  durationS?: number;
  out?: string;
  thresholds: Threshold[];
  /** A relay (or cluster front) to load instead of starting one on 127.0.0.1. */
  target?: string;
  phones?: number;
  /** Multiplies every protocol limit the scenario waits for (1 = the real limits). */
  timeScale: number;
  /** Redis topologies (one Redis, Sentinel, Cluster) the multi-node passes run on, each in turn. */
  redisUrls: string[];
  /** upgrade: the git revision whose nodes are replaced by the working tree's. */
  from?: string;
  help: boolean;
  /** A scenario's own flags (Scenario.options), as parsed: e.g. relay-overhead's --rounds. */
  extra: Record<string, string | boolean | string[] | undefined>;
}

/** A scenario's own flags, beside the common ones (node:util parseArgs option shapes). */
export type ExtraOptions = NonNullable<ParseArgsConfig['options']>;

export class UsageError extends Error {
  override name = 'UsageError';
}

function positive(name: string, raw: string | undefined, integer: boolean): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)))
    throw new UsageError(`--${name} must be a positive ${integer ? 'integer' : 'number'}, got "${raw}"`);
  return n;
}

const COMMON = new Set(['duration', 'out', 'threshold', 'target', 'phones', 'time-scale', 'redis-url', 'from', 'help']);

export function parseOptions(argv: string[], extra: ExtraOptions = {}): CommonOptions {
  for (const name of Object.keys(extra))
    if (COMMON.has(name)) throw new Error(`a scenario's own flag --${name} shadows a common one`);
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        duration: { type: 'string' },
        out: { type: 'string' },
        threshold: { type: 'string', multiple: true },
        target: { type: 'string' },
        phones: { type: 'string' },
        'time-scale': { type: 'string' },
        'redis-url': { type: 'string', multiple: true },
        from: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        ...extra,
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (positionals.length > 1) throw new UsageError(`one scenario at a time, got: ${positionals.join(' ')}`);
  let target: string | undefined;
  if (values.target !== undefined) {
    let u: URL;
    try {
      u = new URL(values.target);
    } catch {
      throw new UsageError(`--target is not a URL: "${values.target}"`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError('--target must be http(s)');
    target = values.target.replace(/\/+$/, '');
  }
  return {
    scenario: positionals[0] ?? '',
    durationS: positive('duration', values.duration, false),
    out: values.out,
    thresholds: (values.threshold ?? []).map(parseThreshold),
    target,
    phones: positive('phones', values.phones, true),
    timeScale: positive('time-scale', values['time-scale'], false) ?? 1,
    redisUrls: values['redis-url'] ?? [],
    from: values.from,
    help: !!values.help,
    extra: Object.fromEntries(
      Object.keys(extra).map((k) => [k, (values as Record<string, string | boolean | string[] | undefined>)[k]]),
    ),
  };
}
