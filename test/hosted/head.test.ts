// HEAD on hosted mode's pages and endpoints, as uptime monitors and link checkers send it: a path
// GET serves answers HEAD with GET's status and headers (Content-Length that of GET's body) and
// no body; a path GET does not serve answers 405 with Allow, also without a body. A body after a
// HEAD answer would be read as the start of the next answer on the keep-alive connection.
import { expect, it } from 'vitest';
import { useHostedRelay } from './hosted-relay.ts';
import { headerOf as header, headOnClientPort } from '../helpers/raw-http.ts';

const h = useHostedRelay();
const head = (path: string) => headOnClientPort(h.relay.relay.node.port, path);

it('answers HEAD of every page and document GET serves as GET would, without the body', async () => {
  for (const path of [
    '/account/signin',
    '/account/signin/link?code=nope',
    '/account',
    '/account/phones.json',
    '/account/authorize',
    '/account/assets/style.css',
    '/account/assets/countdown.js',
    '/account/assets/pairing.js',
    '/account/assets/icon.svg',
    '/favicon.ico',
    '/.well-known/oauth-protected-resource/mcp',
    '/.well-known/oauth-protected-resource',
    '/.well-known/oauth-authorization-server',
  ]) {
    const get = await fetch(`${h.url}${path}`, { redirect: 'manual' });
    const body = Buffer.from(await get.arrayBuffer());
    const answer = await head(path);
    expect(answer, path).toMatch(new RegExp(`^HTTP/1\\.1 ${get.status} `));
    for (const name of ['content-type', 'cache-control', 'location', 'access-control-allow-origin'])
      expect(header(answer, name), `${path}: ${name}`).toBe(get.headers.get(name));
    expect(Number(header(answer, 'content-length')), path).toBe(body.length);
  }
});

it('answers 405 with Allow, without a body, where GET is not served; GET gets the same 405', async () => {
  for (const [path, allow] of [
    ['/account/pair', 'POST'],
    ['/account/keys', 'POST'],
    ['/account/keys/revoke', 'POST'],
    ['/account/phones/remove', 'POST'],
    ['/account/connections/revoke', 'POST'],
    ['/account/signout', 'POST'],
    ['/oauth/register', 'POST, OPTIONS'],
    ['/oauth/token', 'POST, OPTIONS'],
  ]) {
    const answer = await head(path);
    expect(answer, path).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n/);
    expect(header(answer, 'allow'), path).toBe(allow);
    const get = await fetch(`${h.url}${path}`);
    expect(get.status, path).toBe(405);
    expect(get.headers.get('allow'), path).toBe(allow);
    await get.text();
  }
});

it('still answers the methods each path serves, and 405 for another on a page', async () => {
  const signin = await fetch(`${h.url}/account/signin`);
  expect(signin.status).toBe(200);
  expect(await signin.text()).toContain('<form');
  const options = await fetch(`${h.url}/oauth/register`, { method: 'OPTIONS' });
  expect(options.status).toBe(204);
  const put = await fetch(`${h.url}/account`, { method: 'PUT' });
  expect(put.status).toBe(405);
  expect(put.headers.get('allow')).toBe('GET, HEAD');
  expect(await put.json()).toEqual({ error: 'method_not_allowed', message: 'use GET or HEAD' });
});
