// phonebridge_http_responses_total and the client side of phonebridge_bytes_total, read from
// this process's registry (the relay runs in it): every response of the client port by route
// pattern and status, nothing of the admin port, body bytes both ways.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { sample } from '../helpers/metrics.ts';

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
});

it('counts client-port responses by route pattern and status, with their body bytes, and not the admin port', async () => {
  const responses = (route: string, status: number) =>
    sample('phonebridge_http_responses_total', `{route="${route}",status="${status}"}`);
  const bytes = (direction: string) => sample('phonebridge_bytes_total', `{side="client",direction="${direction}"}`);
  const inBefore = (await bytes('in')) ?? 0;
  const outBefore = (await bytes('out')) ?? 0;

  const missing = await fetch(`${relay.url}/no/such/endpoint`);
  expect(missing.status).toBe(404);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
  const unauthorised = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  expect(unauthorised.status).toBe(401);
  const answer = await unauthorised.text();
  const admin = `http://127.0.0.1:${relay.relay.node.adminPort}`;
  expect((await fetch(`${admin}/healthz`)).status).toBe(200);
  expect((await fetch(`${admin}/nothing`)).status).toBe(404);

  expect(await responses('unmatched', 404)).toBe(1);
  expect(await responses('/mcp', 401)).toBe(1);
  const text = (await (await fetch(`${admin}/metrics`)).text()).split('\n');
  // Status 200 of every route is there from the start, at zero; what was counted, only that.
  expect(text).toContain('phonebridge_http_responses_total{route="/mcp",status="200"} 0');
  expect(text.filter((l) => l.startsWith('phonebridge_http_responses_total{') && !l.endsWith(' 0'))).toEqual([
    'phonebridge_http_responses_total{route="unmatched",status="404"} 1',
    'phonebridge_http_responses_total{route="/mcp",status="401"} 1',
  ]);
  expect(((await bytes('in')) ?? 0) - inBefore).toBe(Buffer.byteLength(body));
  // The 404's JSON and the 401's (the admin port's answers are not counted).
  const notFound = JSON.stringify({ error: 'not_found', message: 'no such endpoint' });
  expect(((await bytes('out')) ?? 0) - outBefore).toBe(Buffer.byteLength(notFound) + Buffer.byteLength(answer));
});
