// Two gateway nodes in this process sharing real Redis (a fresh key prefix) and real Postgres
// (a fresh database): the phone on `a`, clients free to use either. Tests reach both nodes'
// internals (hub, bus) to check what each holds.
import { randomBytes } from 'node:crypto';
import { createDatabase, REDIS_URL } from '../cluster/harness.ts';
import { dropPrefix } from '../../src/bus/redis/test-support.ts';
import { startTestRelay, type TestRelay } from './relay.ts';

export interface TwoNodes {
  a: TestRelay;
  b: TestRelay;
  /** The Redis key prefix both nodes use (channels are `${prefix}ch:…`). */
  prefix: string;
  stop(): Promise<void>;
}

export async function startTwoNodes(flags: string[] = []): Promise<TwoNodes> {
  const db = await createDatabase();
  const prefix = `pbt:${randomBytes(4).toString('hex')}:`;
  const common = ['--redis-url', REDIS_URL, '--redis-prefix', prefix, '--database-url', db.url, ...flags];
  const a = await startTestRelay([...common, '--node-id', `a-${prefix}`]);
  const b = await startTestRelay([...common, '--node-id', `b-${prefix}`]);
  return {
    a,
    b,
    prefix,
    async stop() {
      await Promise.allSettled([a.stop(), b.stop()]);
      await dropPrefix(prefix, REDIS_URL).catch(() => {});
      await db.drop().catch(() => {});
    },
  };
}
