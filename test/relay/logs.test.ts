// The relay logs method names, sizes, ids and latency — never message content or secrets
// (docs/PROTOCOL.md, "What the relay rewrites": methods, sizes and latency only). Everything a relay does
// on a busy path is driven here at debug level, and the captured log lines are searched for
// each secret and each piece of content that passed through it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { connectClient, startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';

const lines: string[] = [];
let relay: TestRelay;
let phone: TestPhone;

beforeAll(async () => {
  relay = await startTestRelay([], {
    log: createLogger({ level: 'debug', destination: { write: (l) => void lines.push(l) } }),
  });
  phone = await startTestPhone(relay, () => createEchoServer());
});
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
});

it('logs what happened (methods, sizes) but no token, pairing code or message content', async () => {
  const { token } = await relay.key(phone.deviceId);
  const content = 'content-7f3a9c-never-logged';
  const note = 'notification-41b2e8-never-logged';
  const wrongKey = 'pb_wrong-key-5d1e77-never-logged';
  const wrongCode = 'ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ';

  // Bad input: a wrong pairing code, a wrong key.
  const pair = await fetch(`${relay.url}/pair`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code: wrongCode, public_key: 'AAAA', name: 'x' }),
  });
  expect(pair.status).toBeGreaterThanOrEqual(400);
  const bad = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': wrongKey,
    },
    body: '{}',
  });
  expect(bad.status).toBe(401);

  // The busy path: calls whose arguments and answers carry the markers, and a notification.
  const { client } = await connectClient(relay.mcpUrl, token);
  const r = await client.callTool({ name: 'echo', arguments: { text: content } });
  expect(r.content).toEqual([{ type: 'text', text: content }]);
  await client.callTool({ name: 'notify', arguments: { text: note } });
  await client.close();
  await new Promise((res) => setTimeout(res, 200));

  const all = lines.join('');
  // It did log the traffic, at debug level, with method names and sizes…
  const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'mcp request');
  expect(requests.some((l) => l.method === 'tools/call' && l.bytesIn > 0 && l.bytesOut > 0)).toBe(true);
  expect(all).toContain('device connected');
  // …and none of the secrets or the content.
  for (const secret of [
    token,
    token.slice(3),
    phone.qr.code,
    phone.qr.code.replace(/-/g, ''),
    wrongKey,
    wrongCode,
    content,
    note,
  ]) {
    expect(all.includes(secret), `log lines contain ${secret.slice(0, 12)}…`).toBe(false);
  }
});
