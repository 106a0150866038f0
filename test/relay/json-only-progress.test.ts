// A client that accepts only application/json "is still served, with JSON answers only: no SSE
// stream, so no progress events" (docs/PROTOCOL.md, docs/decisions/0215-post-media-types.md).
// Its request may still carry _meta.progressToken: the phone's progress is dropped
// (src/gateway/single-answer.ts, src/gateway/mcp-stateless.ts) and the answer is
// application/json, on the session revisions and on 2026-07-28.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestRelay } from '../helpers/relay.ts';
import { rawPhoneRelay, type RawPhoneRelay } from '../helpers/raw-phone-relay.ts';
import type { OpenSocket } from '../helpers/raw-device.ts';
import { openSession } from '../helpers/raw-mcp.ts';

let relay: TestRelay;
let token: string;
let s: OpenSocket;
let env: RawPhoneRelay | undefined;

beforeAll(async () => {
  ({ relay, token, s } = env = await rawPhoneRelay());
});
afterAll(() => env?.stop());

describe('a JSON-only client with a progress token', () => {
  it('gets its answer as application/json even when the phone sends progress', async () => {
    const h = await openSession(relay.mcpUrl, token);
    const n = s.frames.length;
    const res = fetch(relay.mcpUrl, {
      method: 'POST',
      headers: { ...h, accept: 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'echo', arguments: {}, _meta: { progressToken: 'p1' } },
      }),
    });
    const req = await s.nextFrame((f) => f.method === 'tools/call' && s.frames.indexOf(f) >= n);
    s.ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: req.params._meta.progressToken, progress: 1, total: 2 },
      }),
    );
    await new Promise((r) => setTimeout(r, 100));
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { content: [{ type: 'text', text: 'done' }] } }));
    const r = await res;
    const body = await r.text();
    expect({ status: r.status, contentType: r.headers.get('content-type'), body }).toEqual({
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'done' }] } }),
    });
  });

  it('2026-07-28: gets its answer as application/json even when the phone sends progress', async () => {
    const n = s.frames.length;
    const res = fetch(relay.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        'x-api-key': token,
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'echo',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: {
          name: 'echo',
          arguments: {},
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
            progressToken: 'p2',
          },
        },
      }),
    });
    const req = await s.nextFrame((f) => f.method === 'tools/call' && s.frames.indexOf(f) >= n);
    s.ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: req.params._meta.progressToken, progress: 1, total: 2 },
      }),
    );
    await new Promise((r) => setTimeout(r, 100));
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { content: [{ type: 'text', text: 'done' }] } }));
    const r = await res;
    const body = await r.text();
    expect({
      status: r.status,
      contentType: r.headers.get('content-type'),
      events: body.includes('event: message'),
    }).toEqual({
      status: 200,
      contentType: 'application/json',
      events: false,
    });
    expect(JSON.parse(body)).toMatchObject({
      jsonrpc: '2.0',
      id: 2,
      result: { content: [{ type: 'text', text: 'done' }] },
    });
  });
});
