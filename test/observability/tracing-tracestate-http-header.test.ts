// docs/decisions/0111-trace-context-on-the-bus-and-in-meta.md: "The SERVER span's parent is the
// client's `params._meta.traceparent` (with its `tracestate`); without it, the W3C `traceparent`
// HTTP header" and "The client's `tracestate` and `baggage` are forwarded as sent (the relay adds
// no entry of its own)". W3C Trace Context §3.3: a vendor receiving a tracestate header must send
// it to outgoing requests.
// A client that sends its context as HTTP headers (traceparent + tracestate): the request the
// relay writes to the phone carries the relay's traceparent and the client's tracestate in
// `_meta`; a client's own `_meta.tracestate` travels untouched.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { openSession, post } from '../helpers/raw-mcp.ts';
import { startTraced, type Traced } from '../helpers/traced-relay.ts';

let t: Traced;
beforeAll(async () => {
  t = await startTraced('node-tracestate');
  t.phone.ws.on('message', (d) => {
    const f = JSON.parse((d as Buffer).toString('utf8'));
    if (f.method === 'tools/call')
      t.phone.ws.send(
        JSON.stringify({ jsonrpc: '2.0', id: f.id, result: { content: [{ type: 'text', text: 'ok' }] } }),
      );
  });
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

const call = async (id: number, extraHeaders: Record<string, string>, meta?: Record<string, string>) => {
  const headers = { ...(await openSession(t.relay.mcpUrl, t.token)), ...extraHeaders };
  const params = { name: 'echo', arguments: { text: String(id) }, ...(meta ? { _meta: meta } : {}) };
  const r = await post(t.relay.mcpUrl, headers, JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }));
  expect(r.status).toBe(200);
  return t.phone.frames.find((f) => f.method === 'tools/call' && f.params.arguments.text === String(id));
};

it('the tracestate of an HTTP traceparent the relay continues reaches the phone with the relay traceparent', async () => {
  const traceId = randomBytes(16).toString('hex');
  const parent = randomBytes(8).toString('hex');
  const forwarded = await call(5, { traceparent: `00-${traceId}-${parent}-01`, tracestate: 'vendor=abc' });
  // The relay continues the client's trace (its CLIENT span in _meta.traceparent)…
  expect(forwarded.params._meta.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  // …and the client's tracestate goes with it.
  expect(forwarded.params._meta.tracestate).toBe('vendor=abc');
});

it("a client's _meta.tracestate is forwarded as sent, whatever the HTTP header says", async () => {
  const traceId = randomBytes(16).toString('hex');
  const meta = { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, tracestate: 'a=1 ,b=2' };
  const headers = {
    traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`,
    tracestate: 'vendor=http',
  };
  const forwarded = await call(6, headers, meta);
  expect(forwarded.params._meta.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  expect(forwarded.params._meta.tracestate).toBe('a=1 ,b=2');
});

it('without a tracestate anywhere, none is added', async () => {
  const traceId = randomBytes(16).toString('hex');
  const forwarded = await call(7, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` });
  expect(forwarded.params._meta.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  expect('tracestate' in forwarded.params._meta).toBe(false);
});
