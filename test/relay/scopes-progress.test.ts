// Scopes from the cached tools/list (docs/decisions/0005-tool-scope-in-meta.md) and progress on
// its own stream (docs/decisions/0007-what-the-relay-rewrites.md).
import { beforeAll, describe, expect, it } from 'vitest';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectClient, waitFor } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';

let readToken: string;
const control: EchoServerControl = { calls: [], cancellations: 0 };

const echo = useEchoRelay([], { control });
beforeAll(async () => {
  readToken = (await echo.relay.key(echo.phone.deviceId, ['devices:read'])).token;
});

async function post(token: string, sid: string, body: unknown): Promise<Response> {
  return fetch(echo.relay.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': token,
      'mcp-session-id': sid,
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify(body),
  });
}

describe('scopes', () => {
  it('lists only the tools of the credential scopes, never unscoped ones', async () => {
    const read = await connectClient(echo.relay.mcpUrl, readToken);
    const names = (await read.client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('echo');
    expect(names).not.toContain('tap');
    expect(names).not.toContain('unscoped');
    const full = await connectClient(echo.relay.mcpUrl, echo.token);
    const all = (await full.client.listTools()).tools.map((t) => t.name);
    expect(all).toContain('tap');
    expect(all).not.toContain('unscoped');
    await read.client.close();
    await full.client.close();
  });

  it('refuses tap without devices:act with 403 and the scope challenge; nothing reaches the phone', async () => {
    const { transport, client } = await connectClient(echo.relay.mcpUrl, readToken);
    const before = control.calls.length;
    const r = await post(readToken, transport.sessionId!, {
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: { name: 'tap', arguments: { x: 1, y: 2 } },
    });
    expect(r.status).toBe(403);
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer error="insufficient_scope", scope="devices:act"/);
    const body = await r.json();
    expect(body).toMatchObject({
      id: 9,
      error: { code: -31008, data: { code: 'insufficient_scope', scope: 'devices:act' } },
    });
    const unscoped = await post(echo.token, (await connectClient(echo.relay.mcpUrl, echo.token)).transport.sessionId!, {
      jsonrpc: '2.0',
      id: 10,
      method: 'tools/call',
      params: { name: 'unscoped', arguments: {} },
    });
    expect(((await unscoped.json()) as { error: { code: number } }).error.code).toBe(-32602);
    // Give a stray forward time to arrive before asserting that none did.
    await new Promise((r) => setTimeout(r, 200));
    expect(control.calls.slice(before).map((c) => c.name)).toEqual([]);
    await client.close();
  });

  it('refreshes the catalog on tools/list_changed, then tells clients', async () => {
    const { client, transport } = await connectClient(echo.relay.mcpUrl, readToken);
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed++;
    });
    await waitFor(
      () => echo.relay.relay.node.ctx.hub.allStreams().some((l) => l.sessionId === transport.sessionId),
      5000,
      'GET stream',
    );
    await client.callTool({ name: 'add_tool', arguments: {} });
    await waitFor(() => changed > 0, 5000, 'list_changed');
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('late_tool');
    expect((await client.callTool({ name: 'late_tool', arguments: {} })).content).toEqual([
      { type: 'text', text: 'late' },
    ]);
    await client.close();
  });
});

describe('progress', () => {
  it('delivers progress only to the request that carried the token, even when two clients use the same token', async () => {
    const a = await connectClient(echo.relay.mcpUrl, echo.token);
    const b = await connectClient(echo.relay.mcpUrl, echo.token);
    const seen: Record<string, string[]> = { A: [], B: [] };
    // Raw POSTs so both clients can use the very same progress token.
    const run = async (who: 'A' | 'B', sid: string) => {
      const r = await post(echo.token, sid, {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'progress', arguments: { text: who, n: 5 }, _meta: { progressToken: 'same' } },
      });
      expect(r.headers.get('content-type')).toBe('text/event-stream');
      const text = await r.text();
      // 2025-11-25: a priming event (an id, empty data) comes first; every event has an id.
      const blocks = text.split('\n\n').filter((b) => b.includes('data:'));
      expect(blocks[0]).toMatch(/^id: [\w.-]+:\d+\nretry: \d+\ndata: $/);
      expect(blocks.every((b) => /^id: /m.test(b))).toBe(true);
      const events = text
        .split('\n')
        .filter((l) => l.startsWith('data: ') && l.length > 6)
        .map((l) => JSON.parse(l.slice(6)));
      for (const e of events)
        if (e.method === 'notifications/progress') {
          expect(e.params.progressToken).toBe('same');
          seen[who].push(e.params.message);
        }
      const final = events.at(-1);
      expect(final).toMatchObject({ id: 1, result: { content: [{ type: 'text', text: `${who} done` }] } });
    };
    await Promise.all([run('A', a.transport.sessionId!), run('B', b.transport.sessionId!)]);
    expect(seen.A).toEqual(['A 1', 'A 2', 'A 3', 'A 4', 'A 5']);
    expect(seen.B).toEqual(['B 1', 'B 2', 'B 3', 'B 4', 'B 5']);
    await a.client.close();
    await b.client.close();
  });

  it('refuses a progress token that is not a string or a number at once, in both eras; nothing reaches the phone', async () => {
    const { transport, client } = await connectClient(echo.relay.mcpUrl, echo.token);
    const before = control.calls.length;
    const started = Date.now();
    const r = await post(echo.token, transport.sessionId!, {
      jsonrpc: '2.0',
      id: 11,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'x' }, _meta: { progressToken: null } },
    });
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({
      id: 11,
      error: { code: -32602, message: expect.stringMatching(/progressToken must be a string or a number/) },
    });
    const stateless = await fetch(echo.relay.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-api-key': echo.token,
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'echo',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 12,
        method: 'tools/call',
        params: {
          name: 'echo',
          arguments: { text: 'x' },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
            progressToken: { not: 'a token' },
          },
        },
      }),
    });
    expect(stateless.status).toBe(400);
    expect(await stateless.json()).toMatchObject({ id: 12, error: { code: -32602 } });
    // Forwarded, the phone's SDK would drop the frame and the client wait 30 s for a timeout.
    expect(Date.now() - started).toBeLessThan(5000);
    await new Promise((r) => setTimeout(r, 200));
    expect(control.calls.length).toBe(before);
    await client.close();
  });

  it('works with the SDK client onprogress', async () => {
    const { client } = await connectClient(echo.relay.mcpUrl, echo.token);
    const progress: number[] = [];
    const r = await client.callTool({ name: 'progress', arguments: { text: 'sdk', n: 3 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    expect(r.content).toEqual([{ type: 'text', text: 'sdk done' }]);
    expect(progress).toEqual([1, 2, 3]);
    await client.close();
  });
});
