// A set-up that a whole test file shares, started before its first test and stopped after its
// last. Kept apart from the harnesses (test/helpers/relay.ts), which the load tests import
// outside vitest.
import { afterAll, beforeAll } from 'vitest';
import type { EchoServerControl } from '../fixtures/echo-server.ts';
import { startEchoRelay, type EchoRelay } from './relay.ts';

/**
 * The object `start` gives, filled in by the file's beforeAll and ended by `stop` in its
 * afterAll (not if `start` failed). Read its fields inside tests and hooks, not at the top of
 * the file: they are set once `start` has run.
 */
export function perFile<T extends object>(start: () => Promise<T>, stop: (started: T) => Promise<void>): T {
  const shared = {} as T;
  let started = false;
  beforeAll(async () => {
    Object.assign(shared, await start());
    started = true;
  });
  afterAll(async () => {
    if (started) await stop(shared);
  });
  return shared;
}

/** startEchoRelay (test/helpers/relay.ts) for the whole file: the phone, then the relay, stopped after it. */
export const useEchoRelay = (flags: string[] = [], opts: { control?: EchoServerControl } = {}): EchoRelay =>
  perFile(
    () => startEchoRelay(flags, opts),
    async ({ phone, relay }) => {
      await phone.stop();
      await relay.stop();
    },
  );
