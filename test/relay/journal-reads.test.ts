// The control journal's tail on the embedded store (docs/decisions/0258-the-journal-read-after-a-change.md):
// a poll reads the journal only after the database changed, from any connection, or after
// READ_AT_LEAST_EVERY polls without one (the store's health is still read); a change is read
// at the next poll, and a revocation takes effect as before.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { READ_AT_LEAST_EVERY } from '../../src/gateway/node.ts';
import { startTestPhone, startTestRelay, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { openSession, post, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';

const POLL_MS = 300;
let relay: TestRelay;
let phone: TestPhone;
/** When each journal read began (ms since the epoch). */
const reads: number[] = [];

beforeAll(async () => {
  relay = await startTestRelay(['--control-poll-ms', String(POLL_MS)]);
  phone = await startTestPhone(relay, () => createEchoServer());
  // Every read the node's tail makes, counted on the way through to the real store.
  const store = relay.relay.store.store;
  const tail = store.tailControlEvents.bind(store);
  store.tailControlEvents = (...args) => {
    reads.push(Date.now());
    return tail(...args);
  };
}, 60_000);
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
});

it('an idle node reads the journal once every READ_AT_LEAST_EVERY polls, not at every poll', async () => {
  const from = reads.length;
  await new Promise((r) => setTimeout(r, 3 * READ_AT_LEAST_EVERY * POLL_MS));
  // Three read intervals: at most three reads (one more if a read began just as the wait did);
  // at every poll it would be thirty.
  expect(reads.length - from).toBeLessThanOrEqual(4);
  expect(reads.length - from).toBeGreaterThanOrEqual(1);
}, 30_000);

it('a change is read at the next poll: a revoked key is refused long before the next read it would otherwise wait for', async () => {
  const key = await relay.key(phone.deviceId);
  const session = await openSession(relay.mcpUrl, key.token);
  expect((await post(relay.mcpUrl, session, toolCall(1, 'echo', { text: 'before' }))).status).toBe(200);
  // Just after a read: without the change count the next would be READ_AT_LEAST_EVERY polls away.
  const seen = reads.length;
  await waitFor(() => reads.length > seen, 2 * READ_AT_LEAST_EVERY * POLL_MS, 'a journal read');
  const readAt = reads[reads.length - 1];
  expect(await relay.relay.store.store.revokeToken(key.id)).toBe(true);
  const revokedAt = Date.now();
  await waitFor(() => reads.some((t) => t > revokedAt), READ_AT_LEAST_EVERY * POLL_MS, 'a read after the revocation');
  const next = reads.find((t) => t > revokedAt)!;
  // Read within a few polls of the change (under a loaded suite a timer may run late), where
  // the read it would otherwise wait for is READ_AT_LEAST_EVERY polls after the last one.
  expect(next - readAt).toBeLessThan((READ_AT_LEAST_EVERY - 3) * POLL_MS);
  await waitFor(
    async () => (await post(relay.mcpUrl, session, toolCall(2, 'echo', { text: 'after' }))).status === 401,
    5000,
    'the revoked key refused',
  );
}, 30_000);
