// The admin port as monitors and load balancers use it: GET and HEAD on /metrics, /healthz and
// /readyz (an uptime monitor's default is often HEAD), a clear 405 for any other method, and a
// HEAD answer that carries no body, so the keep-alive connection it came on stays readable.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { headThenGet, responses } from '../helpers/raw-http.ts';

let relay: TestRelay;
let admin: string;
beforeAll(async () => {
  relay = await startTestRelay();
  admin = `http://127.0.0.1:${relay.relay.node.adminPort}`;
});
afterAll(async () => {
  await relay?.stop();
});

it('answers HEAD on each admin endpoint as GET would, without a body, on a connection that stays usable', async () => {
  for (const path of ['/metrics', '/healthz', '/readyz']) {
    const get = await fetch(`${admin}${path}`);
    const body = await get.text();
    const [head, next] = responses(await headThenGet(relay.relay.node.adminPort, path));
    expect(head, path).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(head, path).toContain(`Content-Type: ${get.headers.get('content-type')}`);
    // Content-Length as GET's: /readyz's timings may take a digit more or less; /metrics grows
    // between scrapes (series appear as the process runs), so a size is enough there.
    const length = Number(/\r\nContent-Length: (\d+)\r\n/i.exec(head)?.[1]);
    if (path === '/healthz') expect(length, path).toBe(Buffer.byteLength(body));
    else if (path === '/readyz') expect(Math.abs(length - Buffer.byteLength(body)), path).toBeLessThan(10);
    else expect(length, path).toBeGreaterThan(1000);
    expect(head.endsWith('\r\n\r\n'), `${path}: HEAD answered with a body: ${JSON.stringify(head)}`).toBe(true);
    expect(next, path).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\{"status":"ok","node":/);
  }
});

it('refuses other methods on the admin endpoints with 405 and Allow, and unknown paths with 404', async () => {
  for (const path of ['/metrics', '/healthz', '/readyz', '/readyz?verbose=1'])
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const r = await fetch(`${admin}${path}`, { method });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get('allow'), `${method} ${path}`).toBe('GET, HEAD');
      expect(await r.json()).toEqual({ error: 'method_not_allowed', message: 'use GET or HEAD' });
    }
  const missing = await fetch(`${admin}/nothing`, { method: 'POST' });
  expect(missing.status).toBe(404);
  expect(await missing.json()).toEqual({ error: 'not_found', message: 'admin endpoints: /metrics /healthz /readyz' });
  // A HEAD of an unknown path: 404 and no body either.
  const [head, next] = responses(await headThenGet(relay.relay.node.adminPort, '/nothing'));
  expect(head).toMatch(/^HTTP\/1\.1 404 Not Found\r\n[\s\S]*\r\n\r\n$/);
  expect(next).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
});

it('answers HEAD /readyz with 503 once the node drains, as GET, while /healthz stays 200', async () => {
  await relay.relay.node.drain();
  const ready = await fetch(`${admin}/readyz`);
  expect(ready.status).toBe(503);
  expect(await ready.json()).toEqual({ status: 'draining' });
  const [head, next] = responses(await headThenGet(relay.relay.node.adminPort, '/readyz'));
  expect(head).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n[\s\S]*\r\n\r\n$/);
  expect(head).toContain(`Content-Length: ${Buffer.byteLength('{"status":"draining"}')}\r\n`);
  expect(next).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
});
