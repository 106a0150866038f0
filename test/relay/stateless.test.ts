// Revision 2026-07-28 on the same /mcp: each bad input has its own answer; discover comes
// from the cache; closing a response stream cancels the request at the phone.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';
import { baseHeaders, openSession } from '../helpers/raw-mcp.ts';

const control: EchoServerControl = { calls: [], cancellations: 0 };
const V = '2026-07-28';
const meta = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

const echo = useEchoRelay([], { control });

async function call(
  method: string,
  params: Record<string, unknown>,
  headers: Record<string, string> = {},
  init: RequestInit = {},
) {
  const name = (params.name ?? params.uri) as string | undefined;
  const r = await fetch(echo.relay.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': echo.token,
      'mcp-protocol-version': V,
      'mcp-method': method,
      ...(name ? { 'mcp-name': name } : {}),
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 42,
      method,
      params: { ...params, _meta: { ...meta, ...((params._meta as object) ?? {}) } },
    }),
    ...init,
  });
  const text = await r.text();
  let json: any = text;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: the raw text is the answer
  }
  return { status: r.status, json, headers: r.headers, text };
}

describe('2026-07-28', () => {
  it('answers server/discover from the cached initialize result, without a session', async () => {
    const r = await call('server/discover', {});
    expect(r.status).toBe(200);
    expect(r.headers.get('mcp-session-id')).toBeNull();
    expect(r.json.result.supportedVersions).toEqual([V, '2025-11-25', '2025-06-18', '2025-03-26']);
    expect(r.json.result).toMatchObject({
      resultType: 'complete',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'echo-phone' } },
    });
  });

  it('forwards tools/call and finishes the result with resultType', async () => {
    const r = await call('tools/call', { name: 'echo', arguments: { text: 'modern' } });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      id: 42,
      result: { resultType: 'complete', content: [{ type: 'text', text: 'modern' }] },
    });
  });

  it('lists tools filtered, private to the credential', async () => {
    const r = await call('tools/list', {});
    expect(r.json.result.cacheScope).toBe('private');
    expect(r.json.result.tools.map((t: any) => t.name)).toContain('echo');
  });

  it('rejects a header/body mismatch with 400 / -32020', async () => {
    const r = await call('tools/call', { name: 'echo', arguments: { text: 'x' } }, { 'mcp-name': 'tap' });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ id: 42, error: { code: -32020 } });
    const m = await call('tools/list', {}, { 'mcp-method': 'tools/call' });
    expect(m.status).toBe(400);
    expect(m.json.error.code).toBe(-32020);
  });

  it('rejects an unsupported version with 400 / -32022 and the supported list', async () => {
    const r = await fetch(echo.relay.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': echo.token,
        'mcp-protocol-version': '2099-01-01',
        'mcp-method': 'tools/list',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: { _meta: { ...meta, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } },
      }),
    });
    expect(r.status).toBe(400);
    const j = await r.json();
    expect(j.error.code).toBe(-32022);
    expect(j.error.data.supported).toEqual(expect.arrayContaining([V, '2025-11-25']));
  });

  it('rejects missing _meta fields with -32602', async () => {
    const r = await fetch(echo.relay.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': echo.token,
        'mcp-protocol-version': V,
        'mcp-method': 'tools/list',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: { _meta: { 'io.modelcontextprotocol/protocolVersion': V } },
      }),
    });
    expect(r.status).toBe(400);
    expect((await r.json()).error.code).toBe(-32602);
  });

  it('answers an unknown method with 404 / -32601', async () => {
    const r = await call('ping', {});
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe(-32601);
  });

  it('says why a 2026-07-28 header on a session-era body is refused, not that the revision is unsupported', async () => {
    // A batch, an initialize or an Mcp-Session-Id picks the session era (classifyEra); the
    // header then names a revision the relay serves, only not with sessions.
    const headers = baseHeaders(echo.token, V);
    const sid = (await openSession(echo.relay.mcpUrl, echo.token, '2025-03-26'))['mcp-session-id'];
    const ping = { jsonrpc: '2.0', id: 7, method: 'tools/list' };
    for (const [what, extra, body] of [
      ['a batch', {}, [ping]],
      ['initialize', {}, { jsonrpc: '2.0', id: 7, method: 'initialize', params: {} }],
      ['a session id', { 'mcp-session-id': sid }, ping],
    ] as const) {
      const r = await fetch(echo.relay.mcpUrl, {
        method: 'POST',
        headers: { ...headers, ...extra },
        body: JSON.stringify(body),
      });
      const j = await r.json();
      expect({ what, status: r.status, code: j.error.code }).toEqual({ what, status: 400, code: -32600 });
      expect(j.error.message).toBe(
        'Bad Request: MCP-Protocol-Version 2026-07-28 has no sessions, batches or initialize: send each request ' +
          'on its own, without Mcp-Session-Id, its revision in params._meta (session revisions: 2025-11-25, 2025-06-18, 2025-03-26)',
      );
    }
  });

  it('answers GET and DELETE with 405', async () => {
    for (const method of ['GET', 'DELETE']) {
      const r = await fetch(echo.relay.mcpUrl, {
        method,
        headers: { accept: 'text/event-stream', 'x-api-key': echo.token, 'mcp-protocol-version': V },
      });
      expect(r.status).toBe(405);
    }
  });

  it('refuses a foreign Origin with 403', async () => {
    const r = await call('tools/list', {}, { origin: 'http://evil.example' });
    expect(r.status).toBe(403);
  });

  it('cancels at the phone when the client closes the response stream', async () => {
    const before = control.cancellations;
    const ac = new AbortController();
    const pending = call(
      'tools/call',
      { name: 'sleep', arguments: { ms: 10_000 }, _meta: { progressToken: 1 } },
      {},
      { signal: ac.signal },
    ).catch(() => 'aborted');
    await waitFor(() => echo.relay.relay.node.ctx.hub.device(echo.phone.deviceId)!.inFlight === 1, 5000, 'in flight');
    ac.abort();
    expect(await pending).toBe('aborted');
    await waitFor(() => control.cancellations === before + 1, 5000, 'phone saw cancellation');
    expect(echo.relay.relay.node.ctx.hub.device(echo.phone.deviceId)!.inFlight).toBe(0);
  });

  it('streams progress for its own request only, ending with the finished result', async () => {
    const r = await call('tools/call', {
      name: 'progress',
      arguments: { text: 'p', n: 2 },
      _meta: { progressToken: 'pt' },
    });
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const events = r.text
      .split('\n')
      .filter((l) => l.startsWith('data: ') && l.length > 6)
      .map((l) => JSON.parse(l.slice(6)));
    expect(events.filter((e) => e.method === 'notifications/progress').map((e) => e.params.progressToken)).toEqual([
      'pt',
      'pt',
    ]);
    expect(events.at(-1)).toMatchObject({ id: 42, result: { resultType: 'complete' } });
    expect(r.text).not.toMatch(/^id: /m); // no event ids, no resumption in this revision
  });
});
