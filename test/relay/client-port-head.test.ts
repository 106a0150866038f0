// HEAD on the client port: no route serves it, and its 404 / 405 answer carries no body, so a
// keep-alive connection (a load balancer's pooled one) stays readable for the next request.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { headThenGet, responses } from '../helpers/raw-http.ts';

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
});

it('answers HEAD of /mcp and of an unknown path without a body, and the connection serves the next request', async () => {
  const port = relay.relay.node.port;
  const notFound = JSON.stringify({ error: 'not_found', message: 'no such endpoint' });
  for (const [path, status] of [
    ['/mcp', '405 Method Not Allowed'],
    ['/nothing', '404 Not Found'],
  ]) {
    const [head, next] = responses(await headThenGet(port, path, '/nothing', notFound));
    expect(head, path).toMatch(new RegExp(`^HTTP/1\\.1 ${status}\\r\\n`));
    expect(head.endsWith('\r\n\r\n'), `${path}: HEAD answered with a body: ${JSON.stringify(head)}`).toBe(true);
    expect(next, path).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
  }
  const [head] = responses(await headThenGet(port, '/mcp', '/nothing', notFound));
  expect(head).toContain('Allow: POST, GET, DELETE\r\n');
});
