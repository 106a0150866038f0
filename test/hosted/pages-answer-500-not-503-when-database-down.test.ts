// Regression test: the defect described below is fixed; this keeps it fixed.
// Defect: while the relay's Postgres is unreachable, the hosted pages (the dashboard, the
// magic-link page, a dashboard action) answer `500 Something went wrong` without `Retry-After`,
// as if the relay had a bug, instead of the outage answer the operations guide promises.
//
// Promise, docs/OPERATIONS.md "Postgres unreachable":
//   "What needs the database answers with `503 {"error":"store_unavailable"}` and `Retry-After`
//    … in hosted mode the OAuth token and registration endpoints answer `503
//    {"error":"temporarily_unavailable"}` with `Retry-After` (docs/HOSTED.md)."
// and RFC 9110 §15.6.4: 503 "indicates that the server is currently unable to handle the request
// due to a temporary overload or scheduled maintenance, which will likely be alleviated after some
// delay. The server MAY send a Retry-After header field". A page needs the database exactly like
// those endpoints; a person's browser (and any monitor) should see "try again", not a server bug.
//
// Set-up as test/hosted/oauth-errors-store-down.test.ts: only this test's database stops taking
// connections and its open ones end. Real relay, real HTTP.
import { afterAll, describe, expect, it } from 'vitest';
import { adminQuery as admin } from '../../loadtest/lib/scratch-database.ts';
import { signedInWithPhone, useHostedRelay } from './hosted-relay.ts';
import { formFields } from './helpers.ts';

const h = useHostedRelay();

const dbName = () => new URL(h.db.url).pathname.slice(1);
afterAll(async () => {
  await admin(`alter database ${dbName()} allow_connections true`).catch(() => {});
});

describe('hosted pages while the database is unreachable', () => {
  it('answer 503 with Retry-After (an outage), not 500 (a bug)', async () => {
    const { web } = await signedInWithPhone(h);
    const dashboard = await web.get('/account');
    expect(dashboard.status).toBe(200);
    const pairForm = formFields(dashboard.html, '/account/pair');

    await admin(`alter database ${dbName()} allow_connections false`);
    await admin(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${dbName()}'`);

    const started = Date.now();
    const answers = [];
    for (const [name, call] of [
      ['GET /account', () => web.get('/account')],
      ['GET /account/signin/link', () => web.get('/account/signin/link?code=abcdef')],
      ['POST /account/pair', () => web.post('/account/pair', { ...pairForm, name: 'x' })],
    ] as const) {
      const r = await call();
      answers.push({
        name,
        status: r.status,
        retryAfter: r.res.headers.get('retry-after') !== null,
        html: (r.res.headers.get('content-type') ?? '').startsWith('text/html'),
      });
    }
    // Nothing hangs (it answers at once today: the defect is the status, not the time).
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(answers).toEqual([
      { name: 'GET /account', status: 503, retryAfter: true, html: true },
      { name: 'GET /account/signin/link', status: 503, retryAfter: true, html: true },
      { name: 'POST /account/pair', status: 503, retryAfter: true, html: true },
    ]);
  });
});
