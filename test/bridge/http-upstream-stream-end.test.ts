// An HTTP upstream (`--upstream-url`) that ends the SSE stream of an answer before the answer:
// without event ids the stream cannot be resumed, so that request fails at once with -32603 (not
// at the relay's deadline) and the requests beside it go on; with event ids the SDK resumes it
// (GET with Last-Event-ID) and the answer arrives on the resumed stream; a server that refuses to
// resume fails the request as promptly (src/device/bridge/answer-streams.ts).
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport, type EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallToolResult, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { silentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, type BridgeServerFactory } from '../../src/device/bridge/index.ts';
import { connectToBridge, waitFor } from './connect.ts';

const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

/** Well under the relay's 30 s deadline, which the unfixed bridge waited for. */
const PROMPTLY_MS = 5_000;
/** The test client's own deadline, so a request the bridge leaves pending fails the test in time. */
const CLIENT_TIMEOUT_MS = 10_000;

const seen = { slowStarted: 0, resumes: 0 };
/** Set: how the server answers a GET with Last-Event-ID, instead of resuming the stream. */
let refuseResume: ((res: ServerResponse) => void) | undefined;

/** Events kept per stream, so a stream closed before its answer can be resumed (polling). */
function memoryEventStore(): EventStore {
  const events: { id: string; stream: string; message: JSONRPCMessage }[] = [];
  return {
    // eslint-disable-next-line @typescript-eslint/require-await -- the SDK's EventStore interface returns a promise
    async storeEvent(stream, message) {
      const id = `${stream}_${events.length}`;
      events.push({ id, stream, message });
      return id;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex((e) => e.id === lastEventId);
      if (at < 0) throw new Error('unknown event id');
      const { stream } = events[at];
      for (const e of events.slice(at + 1)) if (e.stream === stream) await send(e.id, e.message);
      return stream;
    },
  };
}

function createUpstream(): McpServer {
  const mcp = new McpServer({ name: 'stream-end-upstream', version: '1.0.0' });
  mcp.registerTool('echo', {}, () => ({ content: [{ type: 'text', text: 'echo' }] }));
  mcp.registerTool('slow', {}, async () => {
    seen.slowStarted++;
    await new Promise((r) => setTimeout(r, 1500));
    return { content: [{ type: 'text', text: 'slow done' }] };
  });
  // Closes its stream after the priming event (which has an id), then answers: the client must
  // resume the stream to get the answer (MCP Streamable HTTP, resumability).
  mcp.registerTool('poll', {}, async (extra) => {
    extra.closeSSEStream?.();
    await new Promise((r) => setTimeout(r, 300));
    return { content: [{ type: 'text', text: 'polled' }] };
  });
  return mcp;
}

/** Each way a POST's SSE stream can end without its answer and without event ids. */
const STREAM_ENDS: Record<string, (res: ServerResponse) => void> = {
  // The server ends the stream cleanly, having sent nothing.
  vanish: (res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(),
  // The connection drops after a keep-alive comment.
  cut: (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' }).write(': keep-alive\n\n');
    setTimeout(() => res.socket?.destroy(), 50);
  },
};

describe('an HTTP upstream ending the SSE stream of an answer before the answer', () => {
  let http: HttpServer;
  let factory: BridgeServerFactory;
  let client: Client;
  beforeAll(async () => {
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    const eventStore = memoryEventStore();
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- each request's errors end its own response
    http = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const raw = Buffer.concat(chunks).toString();
      const body = raw ? (JSON.parse(raw) as { method?: string; params?: { name?: string } }) : undefined;
      const streamEnd = body?.method === 'tools/call' ? STREAM_ENDS[body.params?.name ?? ''] : undefined;
      if (streamEnd) return streamEnd(res);
      if (req.method === 'GET' && req.headers['last-event-id']) {
        seen.resumes++;
        if (refuseResume) return refuseResume(res);
      }
      const id = req.headers['mcp-session-id'] as string | undefined;
      let transport = id ? sessions.get(id) : undefined;
      if (!transport) {
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: randomUUID,
          eventStore,
          retryInterval: 100,
          onsessioninitialized: (sid) => void sessions.set(sid, created),
        });
        await createUpstream().connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res, body);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    factory = await bridgeServerFactory({ upstreamUrl: url, log: silentLogger });
    client = await connectToBridge(factory);
  }, 30_000);
  afterAll(async () => {
    await client?.close();
    await factory?.close();
    http?.closeAllConnections();
    await new Promise((resolve) => http?.close(resolve));
  });

  const call = (name: string) =>
    client.callTool({ name, arguments: {} }, undefined, { timeout: CLIENT_TIMEOUT_MS }).then(
      (r) => ((r as CallToolResult).isError ? `error result: ${textOf(r)}` : textOf(r)),
      (e: Error) => `rejected: ${e.message}`,
    );

  it.each(Object.keys(STREAM_ENDS))(
    'without event ids (%s): that call fails at once; a concurrent call gets its answer',
    async (name) => {
      const slowBefore = seen.slowStarted;
      const slow = call('slow');
      await waitFor(() => seen.slowStarted > slowBefore);
      const started = Date.now();
      const ended = await call(name);
      const elapsedMs = Date.now() - started;
      expect(ended).toBe(
        'rejected: MCP error -32603: the bridged MCP server ended the stream of its answer to tools/call without a result (it gave no event ids to resume the stream from)',
      );
      expect(elapsedMs, 'the call waited for a deadline instead of failing when its stream ended').toBeLessThan(
        PROMPTLY_MS,
      );
      expect(await slow, 'the call in flight beside it was lost').toBe('slow done');
      expect(factory.upstream.connected).toBe(true);
      expect(await call('echo')).toBe('echo');
    },
    30_000,
  );

  it('with event ids: the stream is resumed with GET and Last-Event-ID, and the answer arrives on it', async () => {
    const resumesBefore = seen.resumes;
    expect(await call('poll')).toBe('polled');
    expect(seen.resumes).toBeGreaterThan(resumesBefore);
    expect(factory.upstream.connected).toBe(true);
  });

  it.each<[string, (res: ServerResponse) => void, string, number]>([
    [
      'HTTP 405',
      (res) => res.writeHead(405).end(),
      'and does not resume streams (HTTP 405 to the GET with Last-Event-ID)',
      PROMPTLY_MS,
    ],
    [
      'HTTP 400',
      (res) => res.writeHead(400).end(),
      'and 3 attempts to resume it failed (the last: HTTP 400)',
      PROMPTLY_MS,
    ],
    [
      'a stream that ends at once',
      (res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(),
      'and ended the resumed stream too, giving no event id to resume it from again',
      PROMPTLY_MS,
    ],
    // No answer at all: the bridge's window, 5 s past the attempts at the server's 100 ms `retry`.
    ['no answer', () => {}, 'and did not resume it within 5.3 s', 8_000],
  ])(
    'with event ids, but the server does not resume (%s): that call fails once resuming is over',
    async (_, refusal, why, withinMs) => {
      refuseResume = refusal;
      try {
        const started = Date.now();
        const ended = await call('poll');
        expect(ended).toBe(
          `rejected: MCP error -32603: the bridged MCP server ended the stream of its answer to tools/call without a result ${why}`,
        );
        expect(Date.now() - started).toBeLessThan(withinMs);
      } finally {
        refuseResume = undefined;
      }
      expect(await call('echo')).toBe('echo');
    },
  );
});
