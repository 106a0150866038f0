// subscriptions/listen streams the relay ends itself end gracefully: the listen request's
// result, then the close. Spec 2026-07-28, basic/patterns/subscriptions, "Cancellation" and
// "Graceful Closure": "The server tears it down (e.g., during shutdown) — it SHOULD send a
// successful `subscriptions/listen` response to signal a graceful end …, then close the
// stream"; "a transport that closes without it indicates an unexpected disconnect".
// docs/PROTOCOL.md ("Revision 2026-07-28"): a listen stream the relay ends (a drain, the key
// over its stream budget, a revocation) gets that result last, and no `notifications/cancelled`.
import { describe, expect, it } from 'vitest';
import { waitFor, sseMessages } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';
import { listenStream } from '../helpers/raw-mcp.ts';

// One stream per key (the budget test), a short drain (the drain test, last: it ends the node).
const e = useEchoRelay(['--max-streams-per-key', '1', '--drain-ms', '1000']);

const closedResult = {
  jsonrpc: '2.0',
  id: 'sub',
  result: { resultType: 'complete', _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub' } },
};

/** What a stream carried: the acknowledgment, nothing the server sends only on stdio, the result last. */
function expectGracefulEnd(text: string): void {
  const msgs = sseMessages(text);
  expect(msgs[0]?.method).toBe('notifications/subscriptions/acknowledged');
  expect(msgs.filter((m) => m.method === 'notifications/cancelled')).toEqual([]);
  expect(msgs.at(-1)).toMatchObject(closedResult);
  expect(msgs.at(-1).result._meta['io.modelcontextprotocol/serverInfo']).toBeDefined();
}

describe('2026-07-28 listen streams the relay ends itself', () => {
  it('the key over its stream budget: the oldest listen stream ends with its subscriptions/listen result', async () => {
    const first = await listenStream(e.relay.mcpUrl, e.token);
    await waitFor(() => first.text().includes('acknowledged'), 5000, 'first acknowledged');
    const second = await listenStream(e.relay.mcpUrl, e.token);
    await waitFor(() => second.text().includes('acknowledged'), 5000, 'second acknowledged');
    await Promise.race([first.ended, new Promise((r) => setTimeout(r, 3000))]);
    expect(first.isEnded()).toBe(true);
    expectGracefulEnd(first.text());
    expect(second.isEnded()).toBe(false);
    second.abort();
  });

  it('a drain ends each listen stream with the subscriptions/listen result, not a bare close', async () => {
    const l = await listenStream(e.relay.mcpUrl, e.token);
    await waitFor(() => l.text().includes('acknowledged'), 5000, 'acknowledged');
    const drained = e.relay.relay.node.drain();
    await Promise.race([l.ended, new Promise((r) => setTimeout(r, 5000))]);
    expect(l.isEnded()).toBe(true);
    expectGracefulEnd(l.text());
    await drained;
  });
});
