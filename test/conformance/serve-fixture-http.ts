// Serves test/fixtures/conformance-server.ts directly over Streamable HTTP (session revisions),
// so the conformance suite can be run against the fixture without the relay: that tells
// fixture gaps from relay gaps. One SDK transport + server per session, an in-memory event
// store (SSE resumability, server-sse-polling), DNS-rebinding protection on.
//
//   npx tsx test/conformance/serve-fixture-http.ts      prints {"url":"http://127.0.0.1:PORT/mcp"}
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createConformanceServer } from '../fixtures/conformance-server.ts';

function memoryEventStore(): EventStore {
  const events: Array<{ id: string; stream: string; message: JSONRPCMessage }> = [];
  return {
    // eslint-disable-next-line @typescript-eslint/require-await -- the SDK's EventStore interface returns a promise
    async storeEvent(stream, message) {
      const id = `${stream}_${String(events.length).padStart(8, '0')}`;
      events.push({ id, stream, message });
      return id;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex((e) => e.id === lastEventId);
      if (at < 0) throw new Error('unknown event id');
      const stream = events[at].stream;
      for (const e of events.slice(at + 1)) if (e.stream === stream) await send(e.id, e.message);
      return stream;
    },
  };
}

export async function serveFixtureHttp(port = 0): Promise<{ url: string; close: () => Promise<void> }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  (globalThis as { __closeSseStream?: (sessionId: string | undefined, requestId: unknown) => void }).__closeSseStream =
    (sessionId, requestId) => {
      if (sessionId) transports.get(sessionId)?.closeSSEStream(requestId as string | number);
    };
  const eventStore = memoryEventStore();
  const hosts: string[] = [];

  const readBody = (req: IncomingMessage) =>
    new Promise<unknown>((resolve) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        try {
          resolve(raw ? JSON.parse(raw) : undefined);
        } catch {
          resolve(raw);
        }
      });
    });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    const sid = req.headers['mcp-session-id'];
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    let transport = typeof sid === 'string' ? transports.get(sid) : undefined;
    if (!transport) {
      const isInit =
        req.method === 'POST' &&
        typeof body === 'object' &&
        body !== null &&
        (body as { method?: string }).method === 'initialize';
      if (sid || !isInit) {
        res.writeHead(sid ? 404 : 400, { 'Content-Type': 'application/json' });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: null,
            error: {
              code: sid ? -32001 : -32600,
              message: sid ? 'Session not found' : 'Bad Request: no valid session',
            },
          }),
        );
        return;
      }
      const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore,
        retryInterval: 500,
        enableDnsRebindingProtection: true,
        allowedHosts: hosts,
        onsessioninitialized: (id) => void transports.set(id, t),
      });
      t.onclose = () => {
        if (t.sessionId) transports.delete(t.sessionId);
      };
      await createConformanceServer().connect(t);
      transport = t;
    }
    await transport.handleRequest(req, res, body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  const p = (server.address() as AddressInfo).port;
  hosts.push(`127.0.0.1:${p}`, `localhost:${p}`);
  return {
    url: `http://127.0.0.1:${p}/mcp`,
    close: () =>
      new Promise<void>((r) => {
        for (const t of transports.values()) void t.close();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop()!)) {
  const { url } = await serveFixtureHttp(Number(process.env.PORT ?? 0));
  console.log(JSON.stringify({ url }));
}
