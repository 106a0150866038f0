// Hosted mode's answers leave through the gateway's HTTP edge (src/gateway/http.ts Exchange), as
// /mcp's do: counted in phonebridge_http_responses_total by route pattern (a bounded label set:
// no path or query a client picks becomes a label) and in phonebridge_bytes_total, with the
// keep-alive hint while the connection stays, and `Connection: close` once the node drains.
// Read from this process's registry: the relay runs in it.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { registry } from '../../src/metrics.ts';
import { KEEP_ALIVE_HINT } from '../../src/gateway/http.ts';
import { useHostedRelay } from './hosted-relay.ts';
import { KeepAliveConnection } from '../helpers/raw-http.ts';
import { sample } from '../helpers/metrics.ts';

const h = useHostedRelay();

const responses = async (route: string, status: number) =>
  (await sample('phonebridge_http_responses_total', `{route="${route}",status="${status}"}`)) ?? 0;
const bytesOut = async () => (await sample('phonebridge_bytes_total', '{side="client",direction="out"}')) ?? 0;

it('counts hosted answers by route pattern and status, with their body bytes, and hints keep-alive', async () => {
  const c = new KeepAliveConnection(h.relay.relay.node.port);
  const before = {
    signin: await responses('/account/signin', 200),
    account: await responses('/account', 303),
    discovery: await responses('/.well-known/oauth-authorization-server', 200),
    bytes: await bytesOut(),
  };

  const page = await c.request('GET', '/account/signin');
  expect(page.status).toBe(200);
  expect(page.body).toContain('<form');
  expect(page.headers['set-cookie']).toMatch(/^pb_csrf=/);
  const head = await c.request('HEAD', '/account/signin');
  expect(head.status).toBe(200);
  const redirect = await c.request('GET', '/account');
  expect(redirect.status).toBe(303);
  const discovery = await c.request('GET', '/.well-known/oauth-authorization-server');
  expect(discovery.status).toBe(200);
  for (const a of [page, head, redirect, discovery]) {
    expect(a.headers['keep-alive']).toBe(KEEP_ALIVE_HINT);
    expect(a.headers.connection).toBeUndefined();
  }
  c.close();

  expect(await responses('/account/signin', 200)).toBe(before.signin + 2);
  expect(await responses('/account', 303)).toBe(before.account + 1);
  expect(await responses('/.well-known/oauth-authorization-server', 200)).toBe(before.discovery + 1);
  // The bodies sent (HEAD's none).
  const sent = [page, redirect, discovery].reduce((n, a) => n + Buffer.byteLength(a.body), 0);
  expect((await bytesOut()) - before.bytes).toBe(sent);
});

it('keeps the series count flat under random hosted paths, queries and methods', async () => {
  const rnd = () => randomBytes(6).toString('hex');
  const round = async () => {
    for (const [method, path] of [
      ['GET', `/account/signin?next=${rnd()}`],
      ['GET', `/account/signin/link?code=${rnd()}`],
      ['GET', `/account/${rnd()}`],
      ['POST', `/account/assets/${rnd()}`],
      ['PUT', '/account'],
      ['PATCH', '/oauth/token'],
      ['GET', `/.well-known/oauth-protected-resource/${rnd()}`],
    ])
      await (await fetch(`${h.url}${path}`, { method, redirect: 'manual' })).arrayBuffer();
  };
  // One round binds every label set these requests can reach; more rounds must add none.
  await round();
  const count = async () => (await registry.metrics()).split('\n').filter((l) => l && !l.startsWith('#')).length;
  const first = await count();
  for (let i = 0; i < 20; i++) await round();
  expect(await count()).toBe(first);
});

it('ends hosted answers with Connection: close once the node drains, as on /mcp', async () => {
  const page = new KeepAliveConnection(h.relay.relay.node.port);
  const mcp = new KeepAliveConnection(h.relay.relay.node.port);
  const mcpPost = () =>
    mcp.request(
      'POST',
      '/mcp',
      { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    );
  // Both connections open and idle before the drain (the listener closes when it starts).
  expect((await page.request('GET', '/account/signin')).headers['keep-alive']).toBe(KEEP_ALIVE_HINT);
  expect((await mcpPost()).headers['keep-alive']).toBe(KEEP_ALIVE_HINT);

  const drained = h.relay.relay.node.drain();
  const during = await page.request('GET', '/account/signin');
  const mcpDuring = await mcpPost();
  expect(mcpDuring.status).toBe(401);
  expect(mcpDuring.headers.connection).toBe('close');
  expect(during.status).toBe(200);
  expect(during.headers.connection).toBe('close');
  expect(during.headers['keep-alive']).toBeUndefined();
  page.close();
  mcp.close();
  await drained;
});
