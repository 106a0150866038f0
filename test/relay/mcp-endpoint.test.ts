// /mcp bad inputs and edge cases, each with its own answer.
import { describe, expect, it } from 'vitest';
import { connectClient, startTestPhone, startTestRelay, waitFor } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { request as httpRequest } from 'node:http';

const control: EchoServerControl = { calls: [], cancellations: 0 };

const echo = useEchoRelay(['--request-timeout-ms', '800'], { control });

async function rpc(
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any; headers: Headers }> {
  const r = await fetch(echo.relay.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json: any = text;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: the raw text is the answer
  }
  return { status: r.status, json, headers: r.headers };
}

const toolCallBody = (id: number, name: string, args: Record<string, unknown>) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

async function openSession(revision = '2025-11-25', t = echo.token): Promise<string> {
  const r = await rpc(
    {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: revision, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    },
    { 'x-api-key': t },
  );
  expect(r.status).toBe(200);
  expect(r.json.result.protocolVersion).toBe(revision);
  return r.headers.get('mcp-session-id')!;
}

describe('authentication', () => {
  it('answers a missing token with 401 and the realm', async () => {
    const r = await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm="phonebridge"');
  });

  it('answers a wrong token with 401', async () => {
    const r = await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }, { 'x-api-key': 'pb_wrong' });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer realm="phonebridge", error="invalid_token"/);
  });

  it('lets X-Api-Key win over a bad Bearer', async () => {
    const r = await rpc(
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } },
      { 'x-api-key': echo.token, authorization: 'Bearer pb_wrong' },
    );
    expect(r.status).toBe(200);
  });

  it('answers 402 subscription_required on a locked account, and works again once unlocked', async () => {
    const store = echo.relay.relay.store.store;
    await store.setAccountLocked('local', true);
    echo.relay.relay.node.ctx.auth.invalidate({ accountId: 'local' });
    const r = await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }, { 'x-api-key': echo.token });
    expect(r.status).toBe(402);
    expect(r.json.error).toBe('subscription_required');
    await store.setAccountLocked('local', false);
    echo.relay.relay.node.ctx.auth.invalidate({ accountId: 'local' });
    expect(
      (await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }, { 'x-api-key': echo.token })).status,
    ).toBe(200);
  });
});

describe('sessions', () => {
  it('answers an unknown session with 404', async () => {
    const r = await rpc(
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { 'x-api-key': echo.token, 'mcp-session-id': 'nope' },
    );
    expect(r.status).toBe(404);
  });

  it('requires a session for anything but initialize', async () => {
    const r = await rpc({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'x-api-key': echo.token });
    expect(r.status).toBe(400);
  });

  it('hides a session from another credential (404)', async () => {
    const sid = await openSession();
    const other = (await echo.relay.key(echo.phone.deviceId)).token;
    const r = await rpc({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'x-api-key': other, 'mcp-session-id': sid });
    expect(r.status).toBe(404);
  });

  it('ends a session with DELETE; afterwards it is 404', async () => {
    const sid = await openSession();
    const d = await fetch(echo.relay.mcpUrl, {
      method: 'DELETE',
      headers: { 'x-api-key': echo.token, 'mcp-session-id': sid },
    });
    expect(d.status).toBe(200);
    const r = await rpc(
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { 'x-api-key': echo.token, 'mcp-session-id': sid },
    );
    expect(r.status).toBe(404);
  });

  it('expires idle sessions', async () => {
    const r2 = await startTestRelay(['--session-idle-ms', '300']);
    try {
      const qrPhone = await startTestPhone(r2, () => createEchoServer());
      const t = (await r2.key(qrPhone.deviceId)).token;
      const init = await fetch(r2.mcpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': t },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25' },
        }),
      });
      const sid = init.headers.get('mcp-session-id')!;
      await new Promise((r) => setTimeout(r, 500));
      const late = await fetch(r2.mcpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': t, 'mcp-session-id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(late.status).toBe(404);
      await qrPhone.stop();
    } finally {
      await r2.stop();
    }
  });

  it('swallows notifications/initialized with 202', async () => {
    const sid = await openSession();
    const r = await rpc(
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { 'x-api-key': echo.token, 'mcp-session-id': sid },
    );
    expect(r.status).toBe(202);
  });
});

describe('bad bodies', () => {
  it('answers malformed JSON with a parse error', async () => {
    const sid = await openSession();
    const r = await rpc('{"jsonrpc":', { 'x-api-key': echo.token, 'mcp-session-id': sid });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe(-32700);
  });

  it('answers a body over 256 KiB with 413 too_large', async () => {
    const sid = await openSession();
    const r = await rpc(
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'x'.repeat(300 * 1024) } },
      },
      { 'x-api-key': echo.token, 'mcp-session-id': sid },
    );
    expect(r.status).toBe(413);
    expect(r.json.error.data.code).toBe('too_large');
  });

  it('refuses a numeric id that is not a safe integer, which could not be echoed back exactly', async () => {
    // MCP ids are strings or integers; past 2^53 - 1 an integer loses digits once parsed, and the
    // answer would carry another id than the request (9007199254740993 came back ...992).
    const sid = await openSession();
    const headers = { 'x-api-key': echo.token, 'mcp-session-id': sid };
    const list = (id: string) => `{"jsonrpc":"2.0","id":${id},"method":"tools/list"}`;
    for (const id of ['9007199254740993', '-9007199254740993', '123456789012345678901234567890', '1.5', '1e400']) {
      const r = await rpc(list(id), headers);
      expect({ id, status: r.status, error: r.json.error }).toEqual({
        id,
        status: 400,
        error: { code: -32600, message: 'Invalid Request: id must be a string or an integer within ±(2^53 - 1)' },
      });
    }
    const max = await rpc(list('9007199254740991'), headers);
    expect(max.status).toBe(200);
    expect(max.json.id).toBe(Number.MAX_SAFE_INTEGER);
    // Inside a 2025-03-26 batch the bad id is refused alone.
    const old = await openSession('2025-03-26');
    const batch = await rpc(`[${list('9007199254740993')},${list('"ok"')}]`, { ...headers, 'mcp-session-id': old });
    expect(batch.status).toBe(200);
    expect(batch.json.map((m: any) => [m.id, m.error?.code ?? 'result'])).toEqual([
      [null, -32600],
      ['ok', 'result'],
    ]);
  });

  it('names a tools/call without a string tool name as such, not as an unknown tool "undefined"', async () => {
    const sid = await openSession();
    const headers = { 'x-api-key': echo.token, 'mcp-session-id': sid };
    for (const params of [undefined, {}, { arguments: {} }, { name: 5 }, { name: null }]) {
      const r = await rpc({ jsonrpc: '2.0', id: 9, method: 'tools/call', ...(params && { params }) }, headers);
      expect({ params, error: r.json.error }).toEqual({
        params,
        error: { code: -32602, message: 'Invalid params: params.name must be a string (the tool to call)' },
      });
    }
    const unknown = await rpc({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'nope' } }, headers);
    expect(unknown.json.error).toEqual({ code: -32602, message: 'Unknown tool: nope' });
  });

  it('rejects batches after 2025-03-26 and handles them in 2025-03-26', async () => {
    const modern = await openSession('2025-06-18');
    const batch = [
      { jsonrpc: '2.0', id: 'a', method: 'tools/call', params: { name: 'echo', arguments: { text: 'one' } } },
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      { jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'echo', arguments: { text: 'two' } } },
    ];
    const refused = await rpc(batch, { 'x-api-key': echo.token, 'mcp-session-id': modern });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe(-32600);
    const old = await openSession('2025-03-26');
    const ok = await rpc(batch, { 'x-api-key': echo.token, 'mcp-session-id': old });
    expect(ok.status).toBe(200);
    expect(ok.json).toHaveLength(2);
    expect(ok.json.map((m: any) => [m.id, m.result.content[0].text])).toEqual([
      ['a', 'one'],
      ['b', 'two'],
    ]);
  });
});

/** A POST with exactly these headers (fetch would add an Accept, and a Content-Type for a string body). */
function rawPost(
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; json: any; keepAlive: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(echo.relay.mcpUrl, { method: 'POST', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let json: any = text;
        try {
          json = JSON.parse(text);
        } catch {
          // not JSON: the raw text is the answer
        }
        resolve({ status: res.statusCode!, json, keepAlive: res.headers['keep-alive'] as string | undefined });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('Content-Type and Accept of POST /mcp (docs/decisions/0215-post-media-types.md)', () => {
  const call = (text: string) => toolCallBody(1, 'echo', { text });
  const statelessHeaders = {
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': 'echo',
  };
  const statelessCall = (text: string) =>
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: 'echo',
        arguments: { text },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    });
  const ACCEPT = 'application/json, text/event-stream';

  it('refuses a body not declared application/json with 415 and a JSON-RPC error; nothing reaches the phone', async () => {
    const sid = await openSession();
    const before = control.calls.length;
    for (const contentType of [
      undefined,
      'text/plain',
      'application/x-www-form-urlencoded', // curl -d without -H
      'text/plain; note=application/json',
      'application/jsonx',
    ]) {
      const ct: Record<string, string> = contentType === undefined ? {} : { 'content-type': contentType };
      for (const [headers, body] of [
        [{ 'x-api-key': echo.token, 'mcp-session-id': sid, accept: ACCEPT }, call('415 session')],
        [{ 'x-api-key': echo.token, accept: ACCEPT, ...statelessHeaders }, statelessCall('415 stateless')],
        [{ 'x-api-key': echo.token, accept: ACCEPT }, JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize' })],
        [{ accept: ACCEPT }, call('415 unauthenticated')],
      ] as const) {
        const r = await rawPost({ ...headers, ...ct }, body);
        expect({ contentType, status: r.status }).toEqual({ contentType, status: 415 });
        expect(r.json).toEqual({
          jsonrpc: '2.0',
          id: null,
          error: {
            code: -32600,
            message:
              contentType === undefined
                ? 'Unsupported Media Type: POST /mcp takes a JSON-RPC message with Content-Type: application/json; this request has no Content-Type'
                : `Unsupported Media Type: POST /mcp takes a JSON-RPC message with Content-Type: application/json; this request's is ${JSON.stringify(contentType)}`,
          },
        });
        // The body was read: the connection stays usable.
        expect(r.keepAlive).toBe('timeout=5');
      }
    }
    expect(control.calls.length).toBe(before);
  });

  it('takes application/json in any case, with parameters', async () => {
    const sid = await openSession();
    for (const contentType of [
      'Application/JSON',
      'application/json; charset=utf-8',
      'application/json;charset=UTF-8',
    ]) {
      const r = await rawPost(
        { 'x-api-key': echo.token, 'mcp-session-id': sid, accept: ACCEPT, 'content-type': contentType },
        call(contentType),
      );
      expect({ contentType, status: r.status, text: r.json.result?.content?.[0]?.text }).toEqual({
        contentType,
        status: 200,
        text: contentType,
      });
    }
  });

  it('refuses an Accept that rules out application/json with 406', async () => {
    const sid = await openSession();
    const before = control.calls.length;
    for (const accept of ['text/event-stream', 'text/html', 'application/json;q=0, text/event-stream', 'image/*']) {
      for (const [headers, body] of [
        [{ 'x-api-key': echo.token, 'mcp-session-id': sid }, call('406 session')],
        [{ 'x-api-key': echo.token, ...statelessHeaders }, statelessCall('406 stateless')],
      ] as const) {
        const r = await rawPost({ ...headers, 'content-type': 'application/json', accept }, body);
        expect({ accept, status: r.status }).toEqual({ accept, status: 406 });
        expect(r.json).toEqual({
          jsonrpc: '2.0',
          id: null,
          error: {
            code: -32600,
            message: `Not Acceptable: POST /mcp answers application/json (and text/event-stream when the client lists it too); this request's Accept is ${JSON.stringify(accept)}`,
          },
        });
      }
    }
    expect(control.calls.length).toBe(before);
  });

  it('still serves an Accept without text/event-stream, or none, with JSON answers (docs/decisions/0015-resumable-post-streams.md)', async () => {
    const sid = await openSession();
    for (const accept of [undefined, 'application/json', '*/*', 'application/*', 'text/event-stream;q=0, */*;q=0.1']) {
      const r = await rawPost(
        {
          'x-api-key': echo.token,
          'mcp-session-id': sid,
          'content-type': 'application/json',
          ...(accept === undefined ? {} : { accept }),
        },
        call(`accept ${accept}`),
      );
      expect({ accept, status: r.status, text: r.json.result?.content?.[0]?.text }).toEqual({
        accept,
        status: 200,
        text: `accept ${accept}`,
      });
    }
  });
});

describe('forwarding', () => {
  it('sets the caller context and drops a spoofed one', async () => {
    const sid = await openSession();
    const r = await rpc(
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'echo',
          arguments: { text: 'who' },
          _meta: { 'phonebridge/caller': { credential: 'admin', scopes: ['everything'] }, other: 1 },
        },
      },
      { 'x-api-key': echo.token, 'mcp-session-id': sid },
    );
    expect(r.json.result.content[0].text).toBe('who');
    const seen = control.calls.at(-1)!.meta as Record<string, any>;
    expect(seen['phonebridge/caller'].scopes).toEqual(['devices:read', 'devices:act', 'devices:lease', 'runs:start']);
    expect(seen['phonebridge/caller'].credential).toMatch(/^key_/);
    expect(seen.other).toBe(1);
  });

  it('times out with a timeout error and drops the late answer', async () => {
    const { client } = await connectClient(echo.relay.mcpUrl, echo.token);
    const err = await client.callTool({ name: 'sleep', arguments: { ms: 1500 } }).catch((e) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-31002);
    expect((err as McpError).data).toEqual({ code: 'timeout' });
    // The late answer arrives at ~1.5 s and must not reach anyone; the next call gets its own answer.
    await new Promise((r) => setTimeout(r, 900));
    const next = await client.callTool({ name: 'echo', arguments: { text: 'after' } });
    expect(next.content).toEqual([{ type: 'text', text: 'after' }]);
    expect(echo.relay.relay.node.ctx.hub.device(echo.phone.deviceId)!.inFlight).toBe(0);
    await client.close();
  });
  // A client disconnecting mid-request: test/relay/resume.test.ts (it needs a longer timeout than this relay's).
});

describe('phone offline', () => {
  it('still answers initialize from the cache and gives device_offline on the first real call', async () => {
    const r2 = await startTestRelay();
    try {
      const p = await startTestPhone(r2, () => createEchoServer());
      const t = (await r2.key(p.deviceId)).token;
      await p.stop();
      await waitFor(() => !r2.relay.node.ctx.hub.device(p.deviceId), 5000, 'phone gone');
      const { client } = await connectClient(r2.mcpUrl, t);
      expect(client.getServerVersion()?.name).toBe('echo-phone');
      const err = await client.listTools().catch((e) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-31001);
      expect((err as McpError).data).toEqual({ code: 'device_offline' });
      await client.close();
    } finally {
      await r2.stop();
    }
  });
});

describe('a phone with too many requests in flight', () => {
  it('refuses more with device_busy at once, without asking the phone, and serves again when they end', async () => {
    const r2 = await startTestRelay(['--max-in-flight', '3']);
    const ctl: EchoServerControl = { calls: [], cancellations: 0 };
    try {
      const p = await startTestPhone(r2, () => createEchoServer(ctl));
      const { client } = await connectClient(r2.mcpUrl, (await r2.key(p.deviceId)).token);
      const slow = [1, 2, 3].map(() => client.callTool({ name: 'sleep', arguments: { ms: 1500 } }));
      await waitFor(() => r2.relay.node.ctx.hub.device(p.deviceId)!.inFlight === 3, 5000, 'three calls in flight');
      // The relay counts a call when it sends it; the phone's handler runs later (after the SDK
      // parsed and validated it): wait for all three there too, or a slow phone looks "asked".
      await waitFor(() => ctl.calls.length === 3, 5000, 'three calls at the phone');
      const calls = ctl.calls.length;
      const t0 = Date.now();
      const err = await client.callTool({ name: 'echo', arguments: { text: 'one too many' } }).catch((e) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-31009);
      expect((err as McpError).data).toEqual({ code: 'device_busy' });
      expect(Date.now() - t0).toBeLessThan(1000); // refused at once, not queued
      expect(ctl.calls.length).toBe(calls); // the phone was not asked
      expect((await Promise.all(slow)).map((r) => r.content)).toEqual(
        [1, 2, 3].map(() => [{ type: 'text', text: 'slept 1500' }]),
      );
      expect((await client.callTool({ name: 'echo', arguments: { text: 'room again' } })).content).toEqual([
        { type: 'text', text: 'room again' },
      ]);
      await client.close();
      await p.stop();
    } finally {
      await r2.stop();
    }
  });
});
