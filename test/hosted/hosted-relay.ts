// How a hosted-mode test gets its relay: a fresh Postgres database, a real SMTP sink for the
// sign-in links, and one node (or two on Redis behind one round-robin front, as a load balancer
// would be). Everything it starts, the phones the test registers with it included, ends in stop().
import { randomBytes } from 'node:crypto';
import { createDatabase, REDIS_URL } from '../cluster/harness.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { perFile } from '../helpers/per-file.ts';
import { startFront, type Front } from '../../services/front.ts';
import { startAccountPhone, startSmtpSink, WebClient, type HostedPhone, type SmtpSink } from './helpers.ts';

export interface HostedRelay {
  db: Awaited<ReturnType<typeof createDatabase>>;
  sink: SmtpSink;
  /** The nodes, in start order; one unless `nodes: 2`. */
  nodes: TestRelay[];
  /** The first node. */
  relay: TestRelay;
  /** The public URL: the front's with two nodes, else the node's. */
  url: string;
  front?: Front;
  /** Phones to stop with the relay. */
  phones: HostedPhone[];
  stop(): Promise<void>;
}

export interface HostedRelayOptions {
  /** Two nodes on Redis behind one front (`--public-url` the front's). */
  nodes?: 1 | 2;
  /** One node on Redis too (a bus query the local bus answers differently). */
  redis?: boolean;
  /** More relay flags (`--trust-proxy`, `--control-poll-ms`, …). */
  args?: string[];
  relayOptions?: Parameters<typeof startTestRelay>[1];
}

export async function startHostedRelay(opts: HostedRelayOptions = {}): Promise<HostedRelay> {
  const db = await createDatabase();
  const sink = await startSmtpSink();
  const nodes: TestRelay[] = [];
  const phones: HostedPhone[] = [];
  let front: Front | undefined;
  const stop = async () => {
    await Promise.all(phones.map((p) => p.stop()));
    for (const n of [...nodes].reverse()) await n.stop();
    await front?.close();
    await sink.close();
    await db.drop();
  };
  try {
    const two = opts.nodes === 2;
    const flags = ['--hosted', '--database-url', db.url, '--smtp-url', sink.url, ...(opts.args ?? [])];
    if (two || opts.redis)
      flags.push('--redis-url', REDIS_URL, '--redis-prefix', `pbh:${randomBytes(4).toString('hex')}:`);
    if (two) {
      front = await startFront();
      flags.push('--public-url', front.url);
      for (let i = 0; i < 2; i++) nodes.push(await startTestRelay(flags, opts.relayOptions));
      front.setBackends(nodes.map((n) => ({ host: '127.0.0.1', port: n.relay.node.port })));
    } else {
      nodes.push(await startTestRelay(flags, opts.relayOptions));
    }
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return { db, sink, nodes, relay: nodes[0], url: front?.url ?? nodes[0].url, front, phones, stop };
}

/** startHostedRelay for the whole test file, stopped after its last test. */
export const useHostedRelay = (opts: HostedRelayOptions = {}): HostedRelay =>
  perFile(
    () => startHostedRelay(opts),
    (h) => h.stop(),
  );

/** A client address of its own, so one test's per-address limits do not touch another's. */
export const clientAddress = () => `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.${randomBytes(1)[0]}`;
export const newEmail = (prefix = 'u') => `${prefix}${randomBytes(4).toString('hex')}@example.com`;

/** A new account signed in over plain HTTP from its own address, with one phone of its own. */
export async function signedInWithPhone(h: HostedRelay, phone: { name?: string; server?: 'echo' | 'tools' } = {}) {
  const who = newEmail();
  const web = new WebClient(h.url, undefined, clientAddress());
  await web.signIn(who, h.sink);
  const store = h.relay.relay.store.store;
  const account = (await store.accountByEmail(who))!;
  const started = await startAccountPhone(store, h.url, account.id, phone.name, phone.server);
  h.phones.push(started);
  return { web, who, account, phone: started };
}
