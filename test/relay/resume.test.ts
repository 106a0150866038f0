// SSE event ids and resumption: a client that loses its GET stream gets what it missed.
import { expect, it } from 'vitest';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connectClient, firstProgressEventId, sseMessages, waitFor } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';
import { openSession } from '../helpers/raw-mcp.ts';
import type { SessionChannel } from '../../src/gateway/session-streams.ts';

const control: EchoServerControl = { calls: [], cancellations: 0 };

const echo = useEchoRelay([], { control });

const rawSession = () => openSession(echo.relay.mcpUrl, echo.token);

const channelOf = (sessionId: string) =>
  echo.relay.relay.node.ctx.hub.allStreams().find((l) => l.sessionId === sessionId) as SessionChannel | undefined;

it('the SDK client resumes a dropped GET stream and receives the notification sent while it was away', async () => {
  const { client, transport } = await connectClient(echo.relay.mcpUrl, echo.token);
  const got: string[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void got.push(String(n.params.data)));
  await waitFor(() => (channelOf(transport.sessionId!)?.connected ?? 0) === 1, 5000, 'GET stream');
  await client.callTool({ name: 'notify', arguments: { text: 'before' } });
  await waitFor(() => got.includes('before'), 5000, 'first notification');

  // The relay closes the connection (not the stream); while the client is away a
  // notification is sent; the client comes back with Last-Event-ID and gets it.
  channelOf(transport.sessionId!)!.disconnect();
  expect(channelOf(transport.sessionId!)!.connected).toBe(0);
  await client.callTool({ name: 'notify', arguments: { text: 'while away' } });
  await waitFor(() => got.includes('while away'), 10_000, 'replayed notification');
  await waitFor(() => channelOf(transport.sessionId!)?.connected === 1, 5000, 'stream resumed');
  await client.callTool({ name: 'notify', arguments: { text: 'after' } });
  await waitFor(() => got.includes('after'), 5000, 'live again');
  // Each notification exactly once, in order.
  expect(got).toEqual(['before', 'while away', 'after']);
  await client.close();
});

it('sends each notification on one stream of a session, not all of them', async () => {
  const { client, transport } = await connectClient(echo.relay.mcpUrl, echo.token);
  await waitFor(() => (channelOf(transport.sessionId!)?.connected ?? 0) === 1, 5000, 'SDK GET stream');
  // A second GET stream on the same session, read raw.
  const ac = new AbortController();
  const second = await fetch(echo.relay.mcpUrl, {
    headers: {
      accept: 'text/event-stream',
      'x-api-key': echo.token,
      'mcp-session-id': transport.sessionId!,
      'mcp-protocol-version': '2025-11-25',
    },
    signal: ac.signal,
  });
  expect(second.headers.get('content-type')).toBe('text/event-stream');
  await waitFor(() => channelOf(transport.sessionId!)?.connected === 2, 5000, 'second stream');
  let sdkGot = 0;
  client.setNotificationHandler(LoggingMessageNotificationSchema, () => void sdkGot++);
  const reader = second.body!.getReader();
  let rawText = '';
  const reading = (async () => {
    for (;;) {
      const r = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (r.done) return;
      rawText += new TextDecoder().decode(r.value);
    }
  })();
  await client.callTool({ name: 'notify', arguments: { text: 'once' } });
  await waitFor(() => rawText.includes('"once"') || sdkGot > 0, 5000, 'delivery');
  await new Promise((r) => setTimeout(r, 300));
  const onRaw = rawText.split('"once"').length - 1;
  expect(onRaw + sdkGot).toBe(1);
  ac.abort();
  await reading;
  await client.close();
});

it('a POST stream the client dropped mid-call: GET with its Last-Event-ID follows it to the answer, while the call still runs', async () => {
  // Session revisions do not cancel on disconnect; SSE polling (2025-11-25) resumes the stream.
  const headers = await rawSession();
  const ac = new AbortController();
  const res = await fetch(echo.relay.mcpUrl, {
    method: 'POST',
    signal: ac.signal,
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 'long',
      method: 'tools/call',
      params: { name: 'progress', arguments: { text: 'step', n: 30, delayMs: 50 }, _meta: { progressToken: 'p1' } },
    }),
  });
  expect(res.headers.get('content-type')).toBe('text/event-stream');
  // Read until the first progress event with an id, then hang up.
  const lastId = await firstProgressEventId(res);
  ac.abort();
  // Resumed while the call is still running: the GET follows the POST stream to its answer,
  // then ends (the SDK client does exactly this GET when a POST stream with ids drops).
  expect(echo.relay.relay.node.ctx.hub.device(echo.phone.deviceId)!.inFlight).toBe(1);
  const again = await fetch(echo.relay.mcpUrl, {
    headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastId },
  });
  expect(again.status).toBe(200);
  const replay = await again.text(); // the stream ends after the answer
  const messages = sseMessages(replay);
  const answer = messages.find((m) => m.id === 'long');
  expect(answer?.result?.content?.[0]?.text).toBe('step done');
  // Progress after the last seen event, in order, then the answer: nothing repeated.
  const steps = messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
  expect(steps[0]).toBeGreaterThan(1);
  expect(steps).toEqual([...steps].sort((a, b) => a - b));
  expect(steps.at(-1)).toBe(30);
});

it('a client that disconnects mid-request: the request runs on (disconnection is not cancellation), and nothing is left once it ends', async () => {
  // Session revisions: "Disconnection SHOULD NOT be interpreted as the client cancelling its
  // request. To cancel, the client SHOULD explicitly send an MCP CancelledNotification."
  const headers = await rawSession();
  const conn = () => echo.relay.relay.node.ctx.hub.device(echo.phone.deviceId)!;
  const post = (body: unknown, signal?: AbortSignal) =>
    fetch(echo.relay.mcpUrl, { method: 'POST', signal, headers, body: JSON.stringify(body) });
  const before = control.cancellations;

  // 1. Gone mid-call: the phone finishes the call; the relay drops the answer and keeps nothing.
  const ac = new AbortController();
  // (Reading the body too: an answer that turned into an SSE stream after 1 s aborts there.)
  const first = post(
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 3000 } } },
    ac.signal,
  )
    .then((r) => r.text())
    .catch(() => 'aborted');
  await waitFor(() => control.calls.at(-1)?.name === 'sleep' && conn().inFlight === 1, 3000, 'phone started the call');
  ac.abort();
  expect(await first).toBe('aborted');
  await new Promise((r) => setTimeout(r, 300));
  expect(conn().inFlight).toBe(1); // still running on the phone
  await waitFor(() => conn().inFlight === 0, 6000, 'the call ended on its own');
  expect(control.cancellations).toBe(before);

  // 2. Gone mid-call, then an explicit notifications/cancelled (same id, same session): that cancels.
  const ac2 = new AbortController();
  const calls = control.calls.length;
  const second = post(
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 20_000 } } },
    ac2.signal,
  )
    .then((r) => r.text())
    .catch(() => 'aborted');
  await waitFor(() => conn().inFlight === 1, 3000, 'second call in flight');
  await waitFor(() => control.calls.length > calls, 3000, 'phone started the second call');
  ac2.abort();
  expect(await second).toBe('aborted');
  expect(
    (
      await post({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 2, reason: 'changed my mind' },
      })
    ).status,
  ).toBe(202);
  await waitFor(() => control.cancellations === before + 1, 3000, 'phone saw the cancellation');
  await waitFor(() => conn().inFlight === 0, 3000, 'pending cleared');
});

it('a slow answer arrives as an SSE stream (priming event, then the answer); a fast one, or a client without SSE, gets JSON', async () => {
  const both = await rawSession();
  const call = (headers: Record<string, string>, id: number, name: string, args: Record<string, unknown>) =>
    fetch(echo.relay.mcpUrl, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
    });

  const slow = await call(both, 1, 'sleep', { ms: 1600 });
  expect(slow.headers.get('content-type')).toBe('text/event-stream');
  const text = await slow.text();
  expect(text).toMatch(/^: open\n\nid: \S+\nretry: 1000\ndata: \n\n/); // priming: an id, retry, empty data
  const answer = JSON.parse(/id: \S+\nevent: message\ndata: (.*)\n/.exec(text)![1]);
  expect(answer).toMatchObject({ id: 1, result: { content: [{ type: 'text', text: 'slept 1600' }] } });

  const fast = await call(both, 2, 'echo', { text: 'quick' });
  expect(fast.headers.get('content-type')).toBe('application/json');
  expect((await fast.json()).result.content[0].text).toBe('quick');

  const jsonOnly = await call({ ...both, accept: 'application/json' }, 3, 'sleep', { ms: 1200 });
  expect(jsonOnly.headers.get('content-type')).toBe('application/json');
  expect((await jsonOnly.json()).result.content[0].text).toBe('slept 1200');
});

it('the SDK client whose POST stream drops mid-call gets the answer anyway (it resumes with GET + Last-Event-ID)', async () => {
  const seen: string[] = [];
  let dropped = false;
  const transport = new StreamableHTTPClientTransport(new URL(echo.relay.mcpUrl), {
    requestInit: { headers: { 'X-Api-Key': echo.token } },
    reconnectionOptions: {
      initialReconnectionDelay: 100,
      maxReconnectionDelay: 1000,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 3,
    },
    fetch: async (url, init) => {
      const headers = new Headers(init?.headers);
      const res = await fetch(url, init);
      const isCall = init?.method === 'POST' && String(init.body as string).includes('"tools/call"');
      seen.push(
        `${init?.method ?? 'GET'}${headers.get('last-event-id') ? ' last-event-id' : ''} ${res.headers.get('content-type')}`,
      );
      if (!isCall || dropped || !res.headers.get('content-type')?.includes('text/event-stream')) return res;
      // A network drop right after the priming event: the body errors, the socket closes.
      dropped = true;
      const upstream = res.body!.getReader();
      let text = '';
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const r = await upstream.read();
          if (r.done) return controller.close();
          controller.enqueue(r.value);
          text += new TextDecoder().decode(r.value);
          if (/id: \S+\nretry/.test(text)) {
            await upstream.cancel();
            controller.error(new TypeError('network connection lost'));
          }
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    },
  });
  const client = new Client({ name: 'drops', version: '1.0.0' });
  client.onerror = () => {}; // the SDK reports the drop; the call itself must still succeed
  await client.connect(transport);
  const result = await client.callTool({ name: 'sleep', arguments: { ms: 2500 } });
  expect(result.content).toEqual([{ type: 'text', text: 'slept 2500' }]);
  expect(dropped).toBe(true);
  expect(seen.some((s) => s.startsWith('GET last-event-id text/event-stream'))).toBe(true);
  await client.close();
});

it('a GET naming a POST stream that never existed (or expired) ends at once instead of waiting on it', async () => {
  const headers = await rawSession();
  const farFuture = (Date.now() + 10 * 60_000).toString(36);
  const t0 = Date.now();
  const res = await fetch(echo.relay.mcpUrl, {
    headers: { ...headers, accept: 'text/event-stream', 'last-event-id': `p.${farFuture}.forged00:5` },
  });
  expect(res.status).toBe(200);
  expect(sseMessages(await res.text())).toEqual([]);
  expect(Date.now() - t0).toBeLessThan(2000);
});
