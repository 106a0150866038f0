// subscriptions/listen from a client that takes only JSON answers. docs/decisions/0215-post-
// media-types.md: an Accept without `text/event-stream`, or none, "stays served …: JSON answers
// only, never a stream". docs/PROTOCOL.md ("Revision 2026-07-28"): subscriptions/listen is
// answered only as an SSE stream, so such a client gets `406` / `-32600` with the request's id,
// as a GET /mcp without `text/event-stream` gets its 406.
import { describe, expect, it } from 'vitest';
import { useEchoRelay } from '../helpers/per-file.ts';
import { listenRequest } from '../helpers/raw-mcp.ts';

const echo = useEchoRelay();

describe('2026-07-28 subscriptions/listen and Accept', () => {
  for (const accept of ['application/json', 'application/json, application/*;q=0.5', '']) {
    it(`Accept: ${accept || '(none)'} gets a JSON 406 with the request's id, never an SSE stream`, async () => {
      const r = await fetch(echo.relay.mcpUrl, listenRequest(echo.token, { toolsListChanged: true }, accept));
      expect(r.headers.get('content-type')).toBe('application/json');
      expect(r.status).toBe(406);
      const body = await r.json();
      expect(body).toMatchObject({ jsonrpc: '2.0', id: 'sub', error: { code: -32600 } });
      expect(body.error.message).toMatch(/^Not Acceptable: subscriptions\/listen .*text\/event-stream/);
    });
  }

  it('Accept listing text/event-stream gets the stream, acknowledgment first', async () => {
    const ac = new AbortController();
    const r = await fetch(echo.relay.mcpUrl, { ...listenRequest(echo.token), signal: ac.signal });
    expect([r.status, r.headers.get('content-type')]).toEqual([200, 'text/event-stream']);
    const reader = r.body!.getReader();
    let text = '';
    while (!text.includes('\n\n') || !text.includes('data:')) {
      const c = await reader.read();
      if (c.done) break;
      text += new TextDecoder().decode(c.value);
    }
    expect(text).toContain('notifications/subscriptions/acknowledged');
    ac.abort();
  });
});
