// Closing a node (after its drain) writes the phones' last-seen times only within what is left
// of --drain-ms: with Postgres not answering (Toxiproxy's timeout toxic: no close, no reply) it
// returns at the drain's end, without them, not after the store's 15 s query timeout
// (docs/OPERATIONS.md: a stopping node loses the last-seen times it could not write).
import { afterAll, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startToxiproxy, type Toxiproxy } from '../helpers/toxiproxy.ts';
import { createDatabase } from '../cluster/harness.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';

let tp: Toxiproxy | undefined;
let db: { url: string; drop(): Promise<void> } | undefined;
let relay: TestRelay | undefined;
let phone: TestPhone | undefined;
afterAll(async () => {
  await phone?.stop().catch(() => {});
  await relay?.stop().catch(() => {}); // the store's pool waits out its query timeout here
  await tp?.stop();
  await db?.drop().catch(() => {});
}, 60_000);

const DRAIN_MS = 1000;

it('with the store not answering, drain and node close end at --drain-ms', async () => {
  db = await createDatabase();
  tp = await startToxiproxy();
  const proxy = await tp.proxy('pg', '127.0.0.1:5432');
  relay = await startTestRelay(['--database-url', proxy.through(db.url), '--drain-ms', String(DRAIN_MS)]);
  phone = await startTestPhone(relay, () => createEchoServer());
  await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'upstream' });
  await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'downstream' });

  const t0 = Date.now();
  await relay.relay.node.drain(); // closes the phone's socket: a last-seen time waits to be written
  await relay.relay.node.close();
  const took = Date.now() - t0;
  expect(took, `drain + close took ${took} ms with --drain-ms ${DRAIN_MS}`).toBeLessThan(DRAIN_MS + 1500);
}, 90_000);
