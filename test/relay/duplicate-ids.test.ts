// A request id must be unique within a session (MCP: "The request ID MUST NOT have been
// previously used by the requestor within the same session"). A second request whose id is
// that of a request still in flight in the same session is refused with -32600 and reaches
// no phone; the first completes, and the client's notifications/cancelled for that id still
// names the first (docs/decisions/0216-duplicate-request-ids.md). Real relay, real phone.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';
import { openSession, post, toolCall } from '../helpers/raw-mcp.ts';

const control: EchoServerControl = { calls: [], cancellations: 0 };

const echo = useEchoRelay([], { control });

const echoed = (text: string) => control.calls.some((c) => c.name === 'echo' && (c.args as any).text === text);

/** Starts a sleep call and waits until the phone runs it; `answer` is its answer, later. */
async function sleeping(headers: Record<string, string>, id: number | string, ms: number) {
  const before = control.calls.length;
  const answer = post(echo.relay.mcpUrl, headers, toolCall(id, 'sleep', { ms }));
  await waitFor(() => control.calls.slice(before).some((c) => c.name === 'sleep'), 5000, 'the phone runs the sleep');
  return { answer };
}

function expectDuplicate(r: { status: number; json: any }, id: number | string) {
  expect(r.status).toBe(400);
  expect(r.json.id).toBe(id);
  expect(r.json.error.code).toBe(-32600);
  expect(r.json.error.message).toContain(`id ${JSON.stringify(id)} is already in use by a request in flight`);
}

describe('a request id already in flight in the session', () => {
  it('is refused with -32600 (HTTP 400) and reaches no phone; the first request completes normally', async () => {
    const h = await openSession(echo.relay.mcpUrl, echo.token);
    const { answer: first } = await sleeping(h, 7, 1500);
    const second = await post(echo.relay.mcpUrl, h, toolCall(7, 'echo', { text: 'second of id 7' }));
    expectDuplicate(second, 7);
    expect(echoed('second of id 7')).toBe(false);
    const done = await first;
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ id: 7, result: { content: [{ text: 'slept 1500' }] } });
  });

  it('is refused on the general path too (a request with _meta), against a string id', async () => {
    const h = await openSession(echo.relay.mcpUrl, echo.token);
    const { answer: first } = await sleeping(h, 'x', 1000);
    const withMeta = JSON.stringify({
      jsonrpc: '2.0',
      id: 'x',
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'meta of id x' }, _meta: { progressToken: 'p' } },
    });
    expectDuplicate(await post(echo.relay.mcpUrl, h, withMeta), 'x');
    expect(echoed('meta of id x')).toBe(false);
    // The number 1 and the string "1" are different ids.
    const other = await post(echo.relay.mcpUrl, h, toolCall(1, 'echo', { text: 'number one' }));
    expect(other.json.result.content[0].text).toBe('number one');
    expect((await first).json.result.content[0].text).toBe('slept 1000');
  });

  it('leaves the first request cancellable by its id: notifications/cancelled cancels it at the phone', async () => {
    const h = await openSession(echo.relay.mcpUrl, echo.token);
    const cancelledBefore = control.cancellations;
    const { answer: first } = await sleeping(h, 9, 10_000);
    // Answered before the cancellation is sent: the id must still name the first request.
    const second = await post(echo.relay.mcpUrl, h, toolCall(9, 'echo', { text: 'second of id 9' }));
    const note = await post(
      echo.relay.mcpUrl,
      h,
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9 } }),
    );
    expect(note.status).toBe(202);
    const done = await first;
    expect(done.json).toMatchObject({ id: 9, error: { data: { code: 'cancelled' } } });
    await waitFor(() => control.cancellations > cancelledBefore, 5000, 'the phone heard the cancellation');
    expectDuplicate(second, 9);
  });

  it('is accepted once the first is answered, and in another session at any time', async () => {
    const h = await openSession(echo.relay.mcpUrl, echo.token);
    const other = await openSession(echo.relay.mcpUrl, echo.token);
    const { answer: first } = await sleeping(h, 11, 800);
    const elsewhere = await post(echo.relay.mcpUrl, other, toolCall(11, 'echo', { text: 'other session' }));
    expect(elsewhere.json.result.content[0].text).toBe('other session');
    await first;
    const again = await post(echo.relay.mcpUrl, h, toolCall(11, 'echo', { text: 'after the first' }));
    expect(again.json.result.content[0].text).toBe('after the first');
  });

  it('inside a 2025-03-26 batch: the second message with the id is refused in its slot, the first answered', async () => {
    const h = await openSession(echo.relay.mcpUrl, echo.token, '2025-03-26');
    const r = await post(
      echo.relay.mcpUrl,
      h,
      JSON.stringify([
        JSON.parse(toolCall(3, 'sleep', { ms: 200 })),
        JSON.parse(toolCall(3, 'echo', { text: 'batched twin' })),
        JSON.parse(toolCall(4, 'echo', { text: 'batched other' })),
      ]),
    );
    expect(r.status).toBe(200);
    const [a, b, c] = JSON.parse(r.text);
    expect(a).toMatchObject({ id: 3, result: { content: [{ text: 'slept 200' }] } });
    expect(b.id).toBe(3);
    expect(b.error.code).toBe(-32600);
    expect(b.error.message).toContain('id 3 is already in use by a request in flight');
    expect(c).toMatchObject({ id: 4, result: { content: [{ text: 'batched other' }] } });
    expect(echoed('batched twin')).toBe(false);
  });
});
