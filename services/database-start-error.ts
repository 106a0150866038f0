// How a database that a command cannot open is worded, apart from serve.ts so that the
// one-shot commands (services/cli.ts) need not load the relay to say it.
import { ConfigError } from '../src/config.ts';
import { DatabaseUrlError, DataDirPathError, redactDatabaseUrl, SchemaTooNewError } from '../src/store/index.ts';

/**
 * A Postgres the node cannot start on (unreachable, no such database or role, refused TLS) is
 * a setting to fix, like an unreachable --redis-url: one line naming the flag and the URL
 * without its password (exit 2), not pg's bare "connect ECONNREFUSED 127.0.0.1:5432" (exit 1).
 * The one-shot commands that open the store map their openStore failures through this too
 * (services/cli.ts withStore).
 */
export function databaseStartError(databaseUrl: string | undefined, err: unknown): unknown {
  // A --data-dir too long for the embedded store's socket is a setting refused in the same way.
  if (err instanceof DatabaseUrlError || err instanceof DataDirPathError) return new ConfigError(err.message);
  if (!databaseUrl || !(err instanceof Error) || err instanceof SchemaTooNewError) return err;
  return new ConfigError(`--database-url: cannot start on ${redactDatabaseUrl(databaseUrl)}: ${err.message}`);
}
