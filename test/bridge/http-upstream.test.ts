// The bridge in front of a Streamable HTTP MCP server (an SDK McpServer on node:http in this
// process, so the test can see what reaches it): paging, _meta, progress, cancellation, refusals.
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  LoggingMessageNotificationSchema,
  ResultSchema,
  type CallToolResult,
  type ListToolsResult,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { silentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, type BridgeServerFactory } from '../../src/device/bridge/index.ts';
import { connectToBridge, waitFor } from './connect.ts';

/** What the upstream saw, for the assertions. */
const seen = { started: 0, cancelled: [] as unknown[], unlisted: [] as string[] };

function createUpstream(): McpServer {
  const mcp = new McpServer(
    { name: 'http-upstream', version: '3.1.4' },
    { capabilities: { logging: {} }, instructions: 'test upstream' },
  );
  mcp.registerTool(
    'count',
    { inputSchema: { n: z.number() }, annotations: { readOnlyHint: true } },
    async ({ n }, extra) => {
      for (let i = 1; i <= n; i++)
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: extra._meta!.progressToken!, progress: i, total: n },
        });
      return { content: [{ type: 'text', text: `counted to ${n}` }] };
    },
  );
  mcp.registerTool('whoami', { annotations: { readOnlyHint: true } }, (extra) => ({
    content: [{ type: 'text', text: JSON.stringify(extra._meta ?? {}) }],
  }));
  mcp.registerTool('wait-for-cancel', {}, async (extra) => {
    seen.started++;
    await new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true }));
    seen.cancelled.push(extra.signal.reason);
    return { content: [{ type: 'text', text: 'cancelled' }] };
  });
  mcp.registerTool('ask-roots', {}, async () => {
    try {
      await mcp.server.listRoots();
      return { content: [{ type: 'text', text: 'roots answered?!' }] };
    } catch (err) {
      return { content: [{ type: 'text', text: (err as Error).message }], isError: true };
    }
  });
  mcp.registerTool('announce', {}, async () => {
    // Not tied to the request, so it travels on the session's standalone GET stream.
    await mcp.server.sendLoggingMessage({ level: 'info', data: 'hello from upstream' });
    return { content: [{ type: 'text', text: 'announced' }] };
  });
  // A lenient upstream answers any method: what the bridge lets through, it gets.
  // eslint-disable-next-line @typescript-eslint/require-await -- the SDK types a fallback handler as returning a promise
  mcp.server.fallbackRequestHandler = async (request) => {
    seen.unlisted.push(request.method);
    return {};
  };
  // McpServer answers tools/list in one page; serve pages of two to exercise the bridge's paging.
  const handlers = (
    mcp.server as unknown as {
      _requestHandlers: Map<string, (req: unknown, extra: unknown) => Promise<ListToolsResult>>;
    }
  )._requestHandlers;
  const listAll = handlers.get('tools/list')!;
  handlers.set('tools/list', async (req, extra) => {
    const { tools } = await listAll(req, extra);
    const start = Number((req as { params?: { cursor?: string } }).params?.cursor ?? 0);
    return { tools: tools.slice(start, start + 2), ...(start + 2 < tools.length && { nextCursor: String(start + 2) }) };
  });
  return mcp;
}

let http: HttpServer;
let factory: BridgeServerFactory;
let client: Client;

beforeAll(async () => {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- a rejection surfaces as an unhandled error, which fails the run
  http = createServer(async (req, res) => {
    const id = req.headers['mcp-session-id'] as string | undefined;
    let transport = id ? sessions.get(id) : undefined;
    if (!transport) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (sid) => void sessions.set(sid, transport!),
      });
      await createUpstream().connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
  factory = await bridgeServerFactory({ upstreamUrl: url, log: silentLogger });
  client = await connectToBridge(factory);
});
afterAll(async () => {
  await client?.close();
  await factory?.close();
  http?.closeAllConnections();
  await new Promise((resolve) => http?.close(resolve));
});

const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

describe('bridge to a Streamable HTTP upstream', () => {
  it('initializes with the upstream info and joins every page of tools/list, scoped', async () => {
    expect(client.getServerVersion()).toMatchObject({ name: 'http-upstream', version: '3.1.4' });
    expect(client.getInstructions()).toBe('test upstream');
    const { tools, nextCursor } = await client.listTools();
    expect(nextCursor).toBeUndefined();
    expect(Object.fromEntries(tools.map((t) => [t.name, t._meta?.['phonebridge/scope']]))).toEqual({
      count: 'devices:read',
      whoami: 'devices:read',
      'wait-for-cancel': 'devices:act',
      'ask-roots': 'devices:act',
      announce: 'devices:act',
    });
  });

  it("forwards the request's _meta (the relay's caller context) unchanged", async () => {
    const caller = { credential: 'tok_1', scopes: ['devices:read'] };
    const meta = JSON.parse(
      text(await client.callTool({ name: 'whoami', arguments: {}, _meta: { 'phonebridge/caller': caller } })),
    );
    expect(meta['phonebridge/caller']).toEqual(caller);
  });

  it('relays every progress notification, the last one included', async () => {
    const progress: Progress[] = [];
    const result = await client.callTool({ name: 'count', arguments: { n: 3 } }, undefined, {
      onprogress: (p) => progress.push(p),
    });
    expect(text(result)).toBe('counted to 3');
    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3]);
  });

  it('cancels the upstream request when the caller cancels', async () => {
    const abort = new AbortController();
    const call = client.callTool({ name: 'wait-for-cancel', arguments: {} }, undefined, { signal: abort.signal });
    await waitFor(() => seen.started === 1);
    abort.abort('caller gave up');
    await expect(call).rejects.toThrow();
    await waitFor(() => seen.cancelled.length === 1);
    expect(seen.cancelled[0]).toBe('caller gave up'); // the reason travels too
  });

  it('passes no method upstream that the upstream did not advertise (-32601 from the bridge)', async () => {
    for (const method of ['phone/anything', 'resources/read', 'prompts/get', 'completion/complete']) {
      await expect(client.request({ method, params: { uri: 'x://y', name: 'p' } }, ResultSchema)).rejects.toThrow(
        /-32601|Method not found/,
      );
    }
    expect(seen.unlisted).toEqual([]);
  });

  it('refuses requests from the upstream to its client with a clear error', async () => {
    const result = await client.callTool({ name: 'ask-roots', arguments: {} });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/roots\/list is not available: .*phonebridge relay.*does not forward requests/);
  });

  it("relays notifications from the upstream's standalone stream", async () => {
    const messages: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void messages.push(n.params.data));
    await client.callTool({ name: 'announce', arguments: {} });
    await waitFor(() => messages.includes('hello from upstream'));
  });
});
