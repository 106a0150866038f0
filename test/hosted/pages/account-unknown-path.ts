// A path under /account/ that no page serves (`/account/` with its trailing slash, a mistyped or
// outdated link) is answered like the account pages' other errors: an HTML "Not found" page with
// the pages' headers (CSP, no-store), not the gateway's JSON 404 for unknown endpoints
// (src/gateway/node.ts), which a browser would show as raw text. docs/HOSTED.md "Pages".
// Paths outside /account keep the JSON 404; HEAD gets the page's headers without its body.
import { expect, it } from 'vitest';
import { CSP } from '../../../src/hosted/web.ts';
import { headerOf as header, headOnClientPort } from '../../helpers/raw-http.ts';
import { h } from './shared.ts';

it('answers an unknown path under /account/ with the HTML 404 page, for any method', async () => {
  for (const [method, path] of [
    ['GET', '/account/'],
    ['GET', '/account/nope'],
    ['GET', '/account/keys/nope?x=1'],
    ['POST', '/account/nope'],
  ] as const) {
    const res = await fetch(`${h.url}${path}`, { method, redirect: 'manual' });
    const html = await res.text();
    expect(
      {
        status: res.status,
        type: res.headers.get('content-type'),
        csp: res.headers.get('content-security-policy'),
        cache: res.headers.get('cache-control'),
        title: /<title>([^<]*)<\/title>/.exec(html)?.[1],
      },
      `${method} ${path}`,
    ).toEqual({
      status: 404,
      type: 'text/html; charset=utf-8',
      csp: CSP,
      cache: 'no-store',
      title: 'Not found · phonebridge',
    });
  }
  const answer = await headOnClientPort(h.relay.relay.node.port, '/account/');
  expect(answer).toMatch(/^HTTP\/1\.1 404 /);
  expect(header(answer, 'content-type')).toBe('text/html; charset=utf-8');
});

it('leaves the pages themselves and the JSON 404 outside /account as they were', async () => {
  const dashboard = await fetch(`${h.url}/account`, { redirect: 'manual' });
  expect(dashboard.status).toBe(303);
  expect((await fetch(`${h.url}/account/signin`)).status).toBe(200);
  expect((await fetch(`${h.url}/account/assets/style.css`)).status).toBe(200);
  const elsewhere = await fetch(`${h.url}/nope`);
  expect(elsewhere.status).toBe(404);
  expect(elsewhere.headers.get('content-type')).toMatch(/^application\/json/);
});
