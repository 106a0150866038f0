// Two relay nodes in this process sharing one Postgres database and one Redis prefix: a phone
// on `a`, clients on `b`, so every request crosses the bus.
import { createDatabase } from '../cluster/harness.ts';
import { dropPrefix, randomPrefix, REDIS_URL } from '../../src/bus/redis/test-support.ts';
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
  const prefix = randomPrefix();
  const common = ['--database-url', db.url, '--redis-url', REDIS_URL, '--redis-prefix', prefix, ...flags];
  const a = await startTestRelay([...common, '--node-id', `a-${prefix.split(':')[1]}`]);
  const b = await startTestRelay([...common, '--node-id', `b-${prefix.split(':')[1]}`]).catch(async (err) => {
    await a.stop();
    throw err;
  });
  return {
    a,
    b,
    prefix,
    async stop() {
      await b.stop().catch(() => {});
      await a.stop().catch(() => {});
      await dropPrefix(prefix).catch(() => {});
      await db.drop().catch(() => {});
    },
  };
}
