// HEAD and other methods on /api/v1, as uptime monitors, link checkers and proxies send them: a
// path GET serves answers HEAD with GET's status and headers (Content-Length that of GET's body,
// the same key checks first) and no body; a method a path does not serve is 405 with Allow, also
// without a body for HEAD. A body after a HEAD answer would be read as the start of the next
// answer on the keep-alive connection.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { pairRaw } from '../helpers/raw-device.ts';
import { headerOf as header, headOnClientPort } from '../helpers/raw-http.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

let relay: TestRelay;
let key: string;
const head = (path: string, headers?: Record<string, string>) => headOnClientPort(relay.relay.node.port, path, headers);
let phoneId: string;
beforeAll(async () => {
  relay = await startTestRelay();
  phoneId = (await pairRaw(relay.url, (await relay.pair('head')).code)).deviceId;
  key = (await createFleetKey(relay.relay.store.store, { accountId: 'local', scopes: [...SCOPES] })).token;
}, 60_000);
afterAll(async () => {
  await relay?.stop();
});

it('answers HEAD of every GET route as GET would, without the body', async () => {
  const auth = { 'x-api-key': key };
  for (const path of [
    '/api/v1/openapi.json',
    '/api/v1/devices',
    '/api/v1/devices?selector=site%3Dnowhere',
    `/api/v1/devices/${phoneId}`,
    '/api/v1/devices/dev_missing',
    '/api/v1/allocations',
    '/api/v1/keys',
    '/api/v1/enrollments',
  ]) {
    const get = await fetch(`${relay.url}${path}`, { headers: auth });
    const body = Buffer.from(await get.arrayBuffer());
    const answer = await head(path, auth);
    expect(answer, path).toMatch(new RegExp(`^HTTP/1\\.1 ${get.status} `));
    expect(header(answer, 'content-type'), path).toBe(get.headers.get('content-type'));
    expect(Number(header(answer, 'content-length')), path).toBe(body.length);
  }
  // The key is checked as for GET: none is the same 401 and challenge, without the body.
  const anonymous = await head('/api/v1/devices');
  expect(anonymous).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n/);
  expect(header(anonymous, 'www-authenticate')).toBe('Bearer realm="phonebridge"');
});

it('answers 405 with Allow for a method a path does not serve (HEAD without a body), 404 off the table', async () => {
  const allowed: Array<[string, string]> = [
    ['/api/v1/openapi.json', 'GET, HEAD'],
    ['/api/v1/devices', 'GET, HEAD'],
    [`/api/v1/devices/${phoneId}`, 'GET, HEAD, PATCH, DELETE'],
    ['/api/v1/allocations', 'GET, HEAD, POST'],
    ['/api/v1/allocations/alc_x/renew', 'POST'],
    ['/api/v1/allocations/alc_x', 'DELETE'],
    ['/api/v1/keys', 'GET, HEAD, POST'],
    ['/api/v1/keys/key_x', 'DELETE'],
    ['/api/v1/enrollments', 'GET, HEAD, POST'],
    ['/api/v1/enrollments/enr_x', 'DELETE'],
  ];
  for (const [path, allow] of allowed) {
    const methods = allow.split(', ');
    const other = ['PUT', 'POST', 'GET', 'DELETE'].find((m) => !methods.includes(m))!;
    const r = await fetch(`${relay.url}${path}`, { method: other, headers: { 'x-api-key': key } });
    expect(r.status, `${other} ${path}`).toBe(405);
    expect(r.headers.get('allow'), path).toBe(allow);
    const use = methods.length === 1 ? methods[0] : `${methods.slice(0, -1).join(', ')} or ${methods.at(-1)}`;
    expect(await r.json(), path).toEqual({ error: 'method_not_allowed', message: `use ${use}` });
    if (!methods.includes('HEAD')) {
      const answer = await head(path);
      expect(answer, path).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n/);
      expect(header(answer, 'allow'), path).toBe(allow);
    }
  }
  const off = await fetch(`${relay.url}/api/v1/devices/${phoneId}/nothing`, { method: 'PUT' });
  expect(off.status).toBe(404);
  expect(await off.json()).toEqual({ error: 'not_found', message: 'no such endpoint; see /api/v1/openapi.json' });
});
