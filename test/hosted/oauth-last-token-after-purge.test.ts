// docs/HOSTED.md (Pages, GET /account): OAuth connections list "… scopes, last token, Revoke";
// (5. Token) "the grant shows on the dashboard under OAuth connections (client name, client id,
// redirect host, when its last token was minted)". An access token lives one hour and the node's
// purge (every 10 minutes, src/gateway/node.ts) deletes expired tokens: the "last token" must not
// turn into "never" for a connection that did mint tokens (the grant keeps its last mint time,
// src/store/migrations/009_grant_last_token.ts).
import { describe, expect, it } from 'vitest';
import { useHostedRelay } from './hosted-relay.ts';
import { accountWithClient, tokensFor } from './oauth-connection.ts';

const h = useHostedRelay({ args: ['--trust-proxy'] });

const lastToken = (html: string) => /data-testid="grant-last-use">([^<]*)</.exec(html)?.[1];

describe('dashboard: an OAuth connection’s last token', () => {
  it('still shows when the last token was minted once that access token expired and the purge ran', async () => {
    const { web, phone, clientId } = await accountWithClient(h);
    await tokensFor(h, web, clientId, phone.deviceId);
    const before = lastToken((await web.get('/account')).html);
    expect(before).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/);

    // What the node's purge timer does once the one-hour access token has expired (the refresh
    // token, 30 days, and the grant stay: the connection is alive and listed).
    await h.relay.relay.store.store.purgeExpired(new Date(Date.now() + 2 * 3600_000));

    const page = (await web.get('/account')).html;
    expect(page).toContain(clientId); // the connection is still listed
    expect(lastToken(page)).toBe(before);
  });
});
