// Answers of 4 KiB and more go out of reused buffers (docs/decisions/0235-pooled-answer-buffers.md).
// A buffer goes back only once uWS has copied its answer: answers written in the same turn
// never share memory, and an answer whose client has gone gives its buffer back unwritten.
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { expect, it } from 'vitest';
import { connectClient, waitFor } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';
import { sample } from '../helpers/metrics.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';

const control: EchoServerControl = { calls: [], cancellations: 0 };

const echo = useEchoRelay([], { control });

const held = async () => (await sample('phonebridge_answer_buffers_bytes')) ?? NaN;

it('answers 96 calls, large and small, 32 at a time, each with its own bytes', async () => {
  const clients = await Promise.all(Array.from({ length: 4 }, () => connectClient(echo.relay.mcpUrl, echo.token)));
  for (let round = 0; round < 3; round++)
    await Promise.all(
      clients.flatMap(({ client }, c) =>
        Array.from({ length: 8 }, async (_, i) => {
          // Half the answers small (Node's shared pool, never ours: a slice of it at offset 0 of
          // its 8 KiB must not become a pooled 8 KiB buffer), a quarter 4 to 8 KiB, a quarter up
          // to 124 KiB (the size classes up to 128 KiB).
          const k = round * 32 + c * 8 + i;
          const n = k % 2 ? 50 + k : k % 4 ? 4096 + ((k * 37) % 3900) : 4096 + ((k * 7919) % (120 * 1024));
          const text = randomBytes(n).toString('base64').slice(0, n);
          const r = await client.callTool({ name: 'echo', arguments: { text } });
          expect((r.content as Array<{ text: string }>)[0].text === text).toBe(true);
        }),
      ),
    );
  // They came back: the next answers reuse them.
  expect(await held()).toBeGreaterThan(0);
  expect(await held()).toBeLessThanOrEqual(8 * 1024 * 1024);
  for (const { client } of clients) await client.close();
});

it('gives back the buffer of an answer whose client has gone', async () => {
  const { client, transport } = await connectClient(echo.relay.mcpUrl, echo.token);
  const before = await held();
  // 200,000 characters: the 256 KiB class, which the calls above never used.
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: { name: 'blob', arguments: { n: 200_000, ms: 300 } },
  });
  const u = new URL(echo.relay.mcpUrl);
  const req = request({
    host: u.hostname,
    port: u.port,
    path: u.pathname,
    method: 'POST',
    headers: {
      'x-api-key': echo.token,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-session-id': transport.sessionId!,
      'mcp-protocol-version': transport.protocolVersion!,
      'content-length': Buffer.byteLength(body),
    },
  });
  req.on('error', () => {});
  req.end(body);
  const calls = control.calls.length;
  await waitFor(() => control.calls.length > calls, 5000, 'the call at the phone');
  req.destroy();
  // The phone answers 300 ms later, to nobody: its buffer joins the pool unwritten.
  await waitFor(async () => (await held()) === before + 262_144, 5000, 'the buffer back');
  const r = await client.callTool({ name: 'blob', arguments: { n: 200_000 } });
  expect((r.content as Array<{ text: string }>)[0].text).toBe('x'.repeat(200_000));
  expect(await held()).toBe(before + 262_144);
  await client.close();
});
