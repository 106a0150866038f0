// Two relay nodes in this process sharing one Postgres database and one Redis prefix: a phone
// on `a`, clients on `b`, so every request crosses the bus.
import { createDatabase } from '../cluster/harness.ts';
import { dropPrefix, randomPrefix, REDIS_URL } from '../../src/bus/redis/test-support.ts';
import { startTestPhone, startTestRelay, type TestPhone, type TestRelay } from './relay.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import type { SessionChannel } from '../../src/gateway/session-streams.ts';

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

export interface TwoNodesWithPhone {
  t: TwoNodes;
  /** The echo phone (test/fixtures/echo-server.ts), on `a`. */
  phone: TestPhone;
  /** A key for the phone. */
  token: string;
  stop(): Promise<void>;
}

/** Two nodes, the echo phone on `a` and a key for it: clients on `b` cross the bus. */
export async function twoNodesWithEchoPhone(): Promise<TwoNodesWithPhone> {
  const t = await startTwoNodes();
  const phone = await startTestPhone(t.a, () => createEchoServer());
  const token = (await t.a.key(phone.deviceId)).token;
  return {
    t,
    phone,
    token,
    async stop() {
      await phone.stop();
      await t.stop();
    },
  };
}

/** The session's GET stream channel on `node` (src/gateway/session-streams.ts), if it has one. */
export const sessionChannelOn = (node: TestRelay, sessionId: string) =>
  node.relay.node.ctx.hub.allStreams().find((l) => l.sessionId === sessionId) as SessionChannel | undefined;
