// Per-request lines are at debug in both eras (docs/OPERATIONS.md, "Logs"): a 2026-07-28
// (stateless) request gets the same `mcp request` line as a session-era one — method, sizes,
// latency — and, like it, no message content.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { baseHeaders, openSession } from '../helpers/raw-mcp.ts';

const lines: string[] = [];
let relay: TestRelay;
let phone: TestPhone;
let token: string;
beforeAll(async () => {
  relay = await startTestRelay([], {
    log: createLogger({ level: 'debug', destination: { write: (l) => void lines.push(l) } }),
  });
  phone = await startTestPhone(relay, () => createEchoServer());
  token = (await relay.key(phone.deviceId)).token;
});
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
});

const requestLines = () =>
  lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === 'mcp request' && l.method === 'tools/call');

it('a 2026-07-28 tools/call gets its per-request `mcp request` line at debug, as a session-era one does', async () => {
  // Session era: one line.
  const h = await openSession(relay.mcpUrl, token);
  const s = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: h,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'a' } },
    }),
  });
  expect(s.status).toBe(200);
  await s.text();
  await new Promise((r) => setTimeout(r, 100));
  const afterSession = requestLines().length;
  expect(afterSession, 'the session-era call has its line').toBe(1);

  // Stateless era (2026-07-28): no session, the revision in the header and in params._meta.
  const r = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: { ...baseHeaders(token, '2026-07-28'), 'mcp-method': 'tools/call', 'mcp-name': 'echo' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: {
        name: 'echo',
        arguments: { text: 'b' },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
  const body = await r.text();
  expect(r.status, body).toBe(200);
  expect(body).toContain('"result"');
  await new Promise((res) => setTimeout(res, 100));
  expect(
    requestLines().length - afterSession,
    'the 2026-07-28 tools/call was answered but logged no `mcp request` line at debug',
  ).toBe(1);
  const line = requestLines().at(-1)!;
  expect(line).toMatchObject({ level: 20, method: 'tools/call', bytesOut: expect.any(Number), ms: expect.any(Number) });
  expect(JSON.stringify(line), 'no message content').not.toMatch(/echo|"b"/);
});
