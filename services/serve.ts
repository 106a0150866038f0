// `phonebridge serve`: one gateway node. SIGTERM drains (readiness fails at once, in-flight
// requests finish up to --drain-ms, phones are told to reconnect), then exits 0.
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { ConfigError, type RelayConfig } from '../src/config.ts';
import { checkTlsFiles } from './tls-files.ts';
import { createLogger, type Logger } from '../src/log.ts';
import { openStore, type OpenStore } from '../src/store/index.ts';
import { databaseStartError } from './database-start-error.ts';
import { BusUnavailableError, createBus, type Bus } from '../src/bus/index.ts';
import { startGateway, type GatewayNode } from '../src/gateway/node.ts';
import { writeRelayInfo } from './relay-info.ts';
import { startRelayTracing, stopRelayTracing } from '../src/observability/tracing.ts';
import { fleetFeature } from '../src/fleet/index.ts';
import type { HostedOptions } from '../src/hosted/index.ts';

export interface RunningRelay {
  node: GatewayNode;
  store: OpenStore;
  log: Logger;
  stop(): Promise<void>;
}

export async function startRelay(
  config: RelayConfig,
  log = createLogger({ level: config.logLevel }),
  /** Options of the features a program (a test) may set; the CLI sets none. */
  features: { hosted?: HostedOptions } = {},
): Promise<RunningRelay> {
  checkDataDir(config.dataDir);
  if (config.tlsCert && config.tlsKey) checkTlsFiles(config.tlsCert, config.tlsKey);
  // The bus first: a topology that is wrong or not there stops the start with one line (exit 2),
  // what was tried and what answered (RedisBus.connect words it), before the store opens.
  let bus: Bus;
  try {
    bus = await createBus(config, log);
  } catch (err) {
    if (err instanceof BusUnavailableError) throw new ConfigError(`--redis-url: cannot start on ${err.message}`);
    throw err;
  }
  let store: OpenStore;
  try {
    store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, role: 'server' });
  } catch (err) {
    await bus.close();
    throw databaseStartError(config.databaseUrl, err);
  }
  let node: GatewayNode;
  try {
    // The optional features this build serves (src/gateway/features.ts).
    node = await startGateway({
      config,
      store: store.store,
      bus,
      log,
      features: [
        // Hosted mode's modules (mail, OAuth, pages) are loaded only for a node that serves it.
        ...(config.hosted ? [(await import('../src/hosted/index.ts')).hostedFeature(features.hosted)] : []),
        fleetFeature({ apiRequestsPerMinute: config.apiRequestsPerMinute }),
      ],
    });
  } catch (err) {
    await bus.close();
    await store.close();
    throw err;
  }
  writeRelayInfo(config.dataDir, { publicUrl: config.publicUrl, fingerprint: node.fingerprint });
  let stopping: Promise<void> | undefined;
  return {
    node,
    store,
    log,
    stop: () =>
      (stopping ??= (async () => {
        await node.close();
        await bus.close();
        // Closing the pool waits for queries in flight; a store that stopped answering would
        // hold the exit for its 15 s query timeout, past the drain the operator set. What such a
        // query would have written is lost either way (docs/OPERATIONS.md, "Draining").
        const closed = await Promise.race([
          store.close().then(() => true),
          new Promise<false>((r) => setTimeout(r, STORE_CLOSE_MS, false).unref()),
        ]);
        if (!closed) log.warn({ waitedMs: STORE_CLOSE_MS }, 'store did not close in time; exiting without it');
      })()),
  };
}

/** How long a stopping node waits for the store's queries in flight. */
const STORE_CLOSE_MS = 1000;

/**
 * The data dir holds relay.json (and the embedded database): one that cannot be a directory
 * stops the start here, before anything listens, not after (relay.json is written last).
 */
function checkDataDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(
      code === 'EEXIST' || code === 'ENOTDIR'
        ? `--data-dir ${dir} is not a directory`
        : `--data-dir ${dir} cannot be created: ${(err as Error).message}`,
    );
  }
  if (!statSync(dir).isDirectory()) throw new ConfigError(`--data-dir ${dir} is not a directory`);
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    throw new ConfigError(`--data-dir ${dir} is not writable`);
  }
}

/**
 * With --exit-with-parent, stdin is a pipe from the process that started this one (npm run
 * cluster, a test): when it closes — that process exited, even by kill -9 — drain and exit
 * rather than live on as an orphan holding ports and phones.
 */
export function onParentGone(config: RelayConfig, shutdown: () => void): void {
  if (!config.exitWithParent) return;
  process.stdin.on('end', shutdown);
  process.stdin.on('error', shutdown);
  process.stdin.resume();
}

export async function serve(config: RelayConfig): Promise<void> {
  // A stop before the relay is up abandons the start at once, exit 0: nothing is served yet, so
  // there is nothing to drain, and what the start leaves half done the next one finishes or
  // redoes — a new embedded data dir included (CREATING_MARKER, src/store/database/embedded.ts).
  const abandonStart = () => process.exit(0);
  process.once('SIGTERM', abandonStart);
  process.once('SIGINT', abandonStart);
  // Only the standard OTEL_* variables turn tracing on; a value it cannot honour stops the start (exit 2).
  await startRelayTracing(config.nodeId);
  const relay = await startRelay(config);
  process.off('SIGTERM', abandonStart);
  process.off('SIGINT', abandonStart);
  // One failed promise somewhere (a database blip under load) must not take down every phone
  // and client on this node: log it and keep serving. A thrown exception still exits.
  process.on('unhandledRejection', (reason) => {
    relay.log.error(
      { err: reason instanceof Error ? `${reason.name}: ${reason.message}` : String(reason) },
      'unhandled rejection',
    );
  });
  let signalled = false;
  const shutdown = async (signal: string) => {
    if (signalled) return;
    signalled = true;
    relay.log.info({ signal }, 'draining');
    try {
      await relay.node.drain();
      await relay.stop();
      await stopRelayTracing(); // what the node traced last still reaches the collector
      process.exit(0);
    } catch (err) {
      relay.log.error({ err: String(err) }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  onParentGone(config, () => void shutdown('parent gone'));
  // A ready line on stdout for scripts and tests that start the relay as a child process.
  console.log(
    JSON.stringify({
      ready: true,
      url: `${config.publicUrl}/mcp`,
      port: relay.node.port,
      adminPort: relay.node.adminPort,
    }),
  );
}
