// HOSTED.md (5. Token): "Errors are RFC 6749 §5.2 responses, `{"error":…,"error_description":…}`
// with `Cache-Control: no-store`"; (2. Discovery) "the registration and the token endpoint carry
// `Access-Control-Allow-Origin: *`" (browser-based clients read them from their own origin).
// Decision 0166 calls "a 500 (HTML even on OAuth endpoints)" a defect. /mcp answers a database
// outage with 503 `store_unavailable` and `Retry-After` (src/gateway/pairing.ts storeUnavailable).
// While the relay's database refuses connections (a failover, a restart), the token and
// registration endpoints must still answer in their JSON error shape, readable cross-origin:
// HOSTED.md (5. Token) "503 `temporarily_unavailable` … with `Retry-After`".
import { afterAll, describe, expect, it } from 'vitest';
import { adminQuery as admin } from '../../loadtest/lib/scratch-database.ts';
import { useHostedRelay } from './hosted-relay.ts';
import { accountWithClient } from './oauth-connection.ts';

const h = useHostedRelay({ args: ['--trust-proxy'] });

const dbName = () => new URL(h.db.url).pathname.slice(1);
/** This relay's database (and only it) stops taking connections, and its open ones end. */
async function databaseDown() {
  await admin(`alter database ${dbName()} allow_connections false`);
  await admin(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${dbName()}'`);
}
afterAll(async () => {
  await admin(`alter database ${dbName()} allow_connections true`).catch(() => {});
});

describe('OAuth endpoints while the database is unreachable', () => {
  it('the token endpoint and registration answer JSON errors with CORS, not an HTML page', async () => {
    const { clientId } = await accountWithClient(h);
    await databaseDown();

    const token = await fetch(`${h.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://app.example' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        client_id: clientId,
        refresh_token: 'pbr_x',
      }).toString(),
    });
    const tokenBody = await token.text();
    const register = await fetch(`${h.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://app.example', 'x-forwarded-for': '10.9.9.9' },
      body: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:4567/callback'] }),
    });
    const registerBody = await register.text();

    for (const [name, r, body] of [
      ['token', token, tokenBody],
      ['register', register, registerBody],
    ] as const) {
      expect({
        name,
        status: r.status,
        type: r.headers.get('content-type'),
        cors: r.headers.get('access-control-allow-origin'),
        cache: r.headers.get('cache-control'),
        retryAfter: r.headers.get('retry-after'),
      }).toEqual({ name, status: 503, type: 'application/json', cors: '*', cache: 'no-store', retryAfter: '5' });
      expect(JSON.parse(body)).toEqual({ error: 'temporarily_unavailable', error_description: expect.any(String) });
    }
  });
});
