// `phonebridge device run`: the reference phone. Pairs once (keys kept in --state), then
// stays connected, serving the simulated phone's tool surface.
import { parseArgs } from 'node:util';
import { runDevice, loadIdentity, type McpServerLike, type StopInfo } from '../src/device/agent/index.ts';
import { SimPhone } from '../src/device/sim/model.ts';
import { createPhoneServer } from '../src/device/tools/index.ts';
import { UsageError } from './usage-error.ts';
import { ConfigError, decimalInteger } from '../src/config.ts';
import { DatabaseUrlError, postgresSource } from '../src/store/database/postgres.ts';

export function simServerFactory(stateDir: string, seed = 1): () => McpServerLike {
  const phone = new SimPhone({ seed });
  return () => {
    // Called per socket, after pairing, so the identity exists by then.
    const identity = loadIdentity(stateDir);
    return createPhoneServer({ phone, deviceId: identity?.device_id ?? 'unpaired' });
  };
}

export async function deviceCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== 'run') throw new UsageError(`device: expected "run"${sub === undefined ? '' : `, got "${sub}"`}`);
  const { values } = parseArgs({
    args: rest,
    options: {
      state: { type: 'string' },
      pair: { type: 'string' },
      backend: { type: 'string', default: 'sim' },
      name: { type: 'string' },
      seed: { type: 'string' },
      'upstream-cmd': { type: 'string' },
      'upstream-url': { type: 'string' },
      'scope-map': { type: 'string' },
      // Every command takes serve's store flags (README, "Running it for real"); the phone opens
      // no database and ignores them, but refuses a --database-url every other command refuses.
      'data-dir': { type: 'string' },
      'database-url': { type: 'string' },
    },
  });
  checkStoreFlags(values['database-url']);
  if (!values.state) throw new UsageError('device run needs --state DIR (where the phone keeps its keys)');
  const bridgeFlags = (['upstream-cmd', 'upstream-url', 'scope-map'] as const).filter((f) => values[f] !== undefined);
  let createServer: () => McpServerLike;
  // The bridge's upstream outlives nothing of ours: its close() ends a stdio server (stdin closed,
  // then SIGTERM and SIGKILL after 2 s each, docs/OPERATIONS.md "Bridge mode"), ends an HTTP
  // session, and logs the last drop counts; process.exit() would skip all of that.
  let closeBackend: (() => Promise<void>) | undefined;
  if (values.backend === 'sim') {
    // A bridge flag without --backend bridge would otherwise serve the simulated phone in silence.
    if (bridgeFlags.length > 0) throw new UsageError(`--${bridgeFlags[0]} needs --backend bridge`);
    const seed = values.seed === undefined ? 1 : decimalInteger(values.seed);
    if (seed === undefined)
      throw new UsageError(
        `--seed must be a non-negative decimal integer (at most ${Number.MAX_SAFE_INTEGER}), got "${values.seed}"`,
      );
    createServer = simServerFactory(values.state, seed);
  } else if (values.backend === 'bridge') {
    if ((values['upstream-cmd'] === undefined) === (values['upstream-url'] === undefined))
      throw new UsageError('device run --backend bridge: give exactly one of --upstream-cmd or --upstream-url');
    const { bridgeServerFactory } = await import('../src/device/bridge/index.ts');
    const factory = await bridgeServerFactory({
      upstreamCmd: values['upstream-cmd'],
      upstreamUrl: values['upstream-url'],
      scopeMap: values['scope-map'],
    });
    createServer = factory;
    closeBackend = () => factory.close();
  } else {
    throw new UsageError(`unknown --backend "${values.backend}"; use sim or bridge`);
  }
  const ac = new AbortController();
  process.once('SIGINT', () => ac.abort());
  process.once('SIGTERM', () => ac.abort());
  let stop: StopInfo;
  try {
    stop = await runDevice({
      stateDir: values.state,
      pair: values.pair,
      name: values.name,
      createServer,
      signal: ac.signal,
    });
  } finally {
    // Also when pairing fails: the caller (services/cli.ts) exits at once on the error.
    await closeBackend?.().catch((err: unknown) =>
      console.error(`phonebridge device: closing the bridge failed: ${(err as Error).message}`),
    );
  }
  console.error(`phonebridge device: stopped (${stop.reason}): ${stop.message}`);
  process.exit(stop.reason === 'stopped' ? 0 : 3);
}

/**
 * --database-url as the commands that open the database first read it (src/store/database/postgres.ts):
 * a value that is no postgres:// URL stops them with one line naming the flag (exit 2,
 * services/database-start-error.ts), and stops `device run` with the same line. Nothing is
 * opened; --data-dir has no such check before a database is made in it.
 */
function checkStoreFlags(databaseUrl: string | undefined): void {
  // Empty is unset, as for the other commands (src/store/database/index.ts).
  if (!databaseUrl) return;
  try {
    postgresSource(databaseUrl);
  } catch (err) {
    if (err instanceof DatabaseUrlError) throw new ConfigError(err.message);
    throw err;
  }
}
