// docs/OPERATIONS.md "Traces": "A failed request's span has status ERROR and `error.type`: …
// or `tool_error` for a tool result with `isError`" — whatever the result's size. A frame over
// 64 KiB is not parsed (src/observability/tracing.ts endWithFrame); its result's own `isError`
// member is found by a scan (resultIsError), and an `isError` inside content text or a nested
// object is not taken for it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openSession, post } from '../helpers/raw-mcp.ts';
import { startTraced, waitFor, type Traced } from '../helpers/traced-relay.ts';

let t: Traced;
beforeAll(async () => {
  t = await startTraced('node-bigerr');
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

const big = 'e'.repeat(100 * 1024);
/** What the phone answers, by the call's `shape` argument. */
const results: Record<string, (id: number) => string> = {
  small: (id) => `{"jsonrpc":"2.0","id":${id},"result":{"isError":true,"content":[{"type":"text","text":"eee"}]}}`,
  large: (id) => `{"jsonrpc":"2.0","id":${id},"result":{"isError":true,"content":[{"type":"text","text":"${big}"}]}}`,
  // The SDK's order: content first, isError last (and spaced).
  largeLast: (id) =>
    `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"${big}"}],\n "isError" : true}}`,
  // isError spelled in the text, in a content item and in structuredContent, but not the result's.
  largeNested: (id) =>
    `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"{\\"isError\\":true} \\\\\\"isError\\":true ${big}","isError":true}],"structuredContent":{"isError":true},"isError":false}}`,
};

it('a tools/call answered with a 100 KB result with isError is a failed span (tool_error), as a small one is', async () => {
  t.phone.ws.on('message', (d) => {
    const f = JSON.parse((d as Buffer).toString('utf8'));
    if (f.method === 'tools/call') t.phone.ws.send(results[f.params.arguments.shape](f.id));
  });
  const headers = await openSession(t.relay.mcpUrl, t.token);
  const call = (id: string) =>
    post(
      t.relay.mcpUrl,
      headers,
      JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { shape: id } } }),
    );
  for (const id of ['small', 'large', 'largeLast']) expect((await call(id)).json.result.isError).toBe(true);
  expect((await call('largeNested')).json.result.isError).toBe(false);
  const server = (id: string) =>
    t.receiver.spans.find((s) => s.kind === 2 && s.attributes['jsonrpc.request.id'] === id);
  const client = (id: string) =>
    t.receiver.spans.find(
      (s) => s.kind === 3 && s.attributes['mcp.method.name'] === 'tools/call' && s.traceId === server(id)?.traceId,
    );
  await waitFor(
    () => Object.keys(results).every((id) => !!server(id) && !!client(id)),
    10_000,
    'the SERVER and CLIENT spans',
  );
  // The small one is marked, as documented; so are the large ones, wherever isError stands.
  for (const id of ['small', 'large', 'largeLast'])
    for (const s of [server(id)!, client(id)!]) {
      expect(s.attributes['error.type'], id).toBe('tool_error');
      expect(s.status.code, id).toBe(2);
    }
  // An isError that is not the result's own member marks nothing.
  for (const s of [server('largeNested')!, client('largeNested')!]) {
    expect(s.attributes['error.type']).toBeUndefined();
    expect(s.status.code).not.toBe(2);
  }
});
