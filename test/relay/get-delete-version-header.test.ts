// GET and DELETE of /mcp with a session id and an MCP-Protocol-Version that is no session
// revision. docs/PROTOCOL.md, "Revisions and sessions": "A present `MCP-Protocol-Version` header
// must name a session revision, else `400`" (the 2025-11-25 transport: "If the server receives a
// request with an invalid or unsupported MCP-Protocol-Version, it MUST respond with 400 Bad
// Request"); "Revision 2026-07-28": "`GET` and `DELETE` are `405`", with a session id or without.
// So a GET or DELETE naming 2026-07-28 is 405 (`Allow: POST`), one naming an unknown version
// with a session id 400, and neither opens the session's stream nor ends the session.
import { describe, expect, it } from 'vitest';
import { useEchoRelay } from '../helpers/per-file.ts';
import { openSession, post, toolCall } from '../helpers/raw-mcp.ts';

const echo = useEchoRelay();

const cases = [
  { version: '2026-07-28', status: 405, allow: 'POST' },
  { version: '1900-01-01', status: 400, allow: null },
];

for (const { version, status, allow } of cases) {
  describe(`Mcp-Session-Id with MCP-Protocol-Version ${version}`, () => {
    it(`GET is ${status} and opens no stream`, async () => {
      const headers = await openSession(echo.relay.mcpUrl, echo.token);
      const ac = new AbortController();
      const r = await fetch(echo.relay.mcpUrl, {
        method: 'GET',
        headers: { ...headers, accept: 'text/event-stream', 'mcp-protocol-version': version },
        signal: ac.signal,
      });
      const got = { status: r.status, type: r.headers.get('content-type'), allow: r.headers.get('allow') };
      const body = got.type === 'application/json' ? await r.json() : undefined;
      ac.abort();
      expect(got).toEqual({ status, type: 'application/json', allow });
      expect(body.error.code).toBe(-32600);
    });

    it(`DELETE is ${status} and the session lives on`, async () => {
      const headers = await openSession(echo.relay.mcpUrl, echo.token);
      const r = await fetch(echo.relay.mcpUrl, {
        method: 'DELETE',
        headers: { ...headers, 'mcp-protocol-version': version },
      });
      await r.text();
      const after = await post(echo.relay.mcpUrl, headers, toolCall(2, 'echo', { text: 'still here' }));
      expect({ delete: r.status, allow: r.headers.get('allow'), nextCall: after.status }).toEqual({
        delete: status,
        allow,
        nextCall: 200,
      });
    });
  });
}

describe('Mcp-Session-Id with a session revision', () => {
  it('DELETE still ends the session', async () => {
    const headers = await openSession(echo.relay.mcpUrl, echo.token);
    const r = await fetch(echo.relay.mcpUrl, { method: 'DELETE', headers });
    await r.text();
    const after = await post(echo.relay.mcpUrl, headers, toolCall(3, 'echo', { text: 'gone' }));
    expect({ delete: r.status, nextCall: after.status }).toEqual({ delete: 200, nextCall: 404 });
  });
});
