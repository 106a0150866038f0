// An HTTP upstream (`--upstream-url`) that answers one request with an error status: that request
// fails with -32603 naming the status (not the server's body), and the connection, with the
// other requests in flight on it, is kept (src/device/bridge/upstream.ts, as decision 0227 has it
// for stdio). A 404 is the session's end, which only a new session mends: the server did not run
// the request, so it goes again, once, on the new session.
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { silentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, type BridgeServerFactory } from '../../src/device/bridge/index.ts';
import { connectToBridge, waitFor } from './connect.ts';

const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

let slowStarted = 0;
/** Set: the server forgets every session at the next request (as one restarted would). */
let forgetSessions = false;
function createUpstream(): McpServer {
  const mcp = new McpServer({ name: 'http-upstream', version: '1.0.0' });
  mcp.registerTool('echo', { inputSchema: { s: z.string() } }, ({ s }) => ({ content: [{ type: 'text', text: s }] }));
  mcp.registerTool('slow', {}, async () => {
    slowStarted++;
    await new Promise((r) => setTimeout(r, 1500));
    return { content: [{ type: 'text', text: 'slow done' }] };
  });
  mcp.registerTool('fail', {}, () => ({ content: [{ type: 'text', text: 'unreachable' }] }));
  return mcp;
}

describe('an HTTP upstream answering a request with an error status', () => {
  let http: HttpServer;
  let factory: BridgeServerFactory;
  let client: Client;
  beforeAll(async () => {
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- each request's errors end its own response
    http = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const raw = Buffer.concat(chunks).toString();
      const body = raw ? (JSON.parse(raw) as { method?: string; params?: { name?: string } }) : undefined;
      if (body?.method === 'tools/call' && body.params?.name === 'fail') {
        res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error at /srv/secret-path');
        return;
      }
      const id = req.headers['mcp-session-id'] as string | undefined;
      if (forgetSessions) {
        sessions.clear();
        forgetSessions = false;
      }
      let transport = id ? sessions.get(id) : undefined;
      if (id && !transport) {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
        return;
      }
      if (!transport) {
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: randomUUID,
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

  it('fails that call only, naming the status; a concurrent call gets its answer and the upstream stays connected', async () => {
    const slow = client.callTool({ name: 'slow', arguments: {} }).then(
      (r) => ((r as CallToolResult).isError ? `error result: ${textOf(r)}` : textOf(r)),
      (e: Error) => `rejected: ${e.message}`,
    );
    await waitFor(() => slowStarted === 1);
    const failed = await client.callTool({ name: 'fail', arguments: {} }).then(
      () => 'answered',
      (e: Error) => e.message,
    );
    expect(failed).toBe('MCP error -32603: the bridged MCP server answered tools/call with HTTP 500');
    expect(await slow, "the call in flight beside it was lost to another call's HTTP 500").toBe('slow done');
    expect(factory.upstream.connected).toBe(true);
  });

  it('a request that meets the end of its session (HTTP 404) is answered on a new session', async () => {
    await waitFor(() => factory.upstream.connected, 10_000);
    expect(await client.callTool({ name: 'echo', arguments: { s: 'before' } }).then(textOf)).toBe('before');
    forgetSessions = true;
    const after = await client.callTool({ name: 'echo', arguments: { s: 'after' } }).then(
      (r) => ((r as CallToolResult).isError ? `error result: ${textOf(r)}` : textOf(r)),
      (e: Error) => `rejected: ${e.message}`,
    );
    expect(after).toBe('after');
    expect(factory.upstream.connected).toBe(true);
  });
});
