// HOSTED.md (5. Token): "Refresh tokens live 30 days and rotate on every use. Presenting a rotated
// one again answers `invalid_grant` and revokes the whole grant: its refresh tokens and access
// tokens, on every node." SECURITY threat model: "a leaked refresh token used in parallel with
// the real client | rotation; a rotated token presented again revokes the grant". OAuth 2.1
// §4.3.1 / RFC 9700 §4.14.2: reuse of an invalidated refresh token must revoke the active one.
// The checks the endpoint makes of the request itself (an unknown `scope`, a foreign `resource`)
// must not let a replayed rotated token pass without the revocation; a live token in such a
// request is refused as before ("… is `invalid_scope` and rotates nothing").
import { describe, expect, it } from 'vitest';
import { useHostedRelay } from './hosted-relay.ts';
import { tokenRequest } from './helpers.ts';
import { accountWithClient, tokensFor } from './oauth-connection.ts';

const h = useHostedRelay({ args: ['--trust-proxy'] });

async function rotated() {
  const { web, phone, clientId } = await accountWithClient(h);
  const first = await tokensFor(h, web, clientId, phone.deviceId);
  const refresh = (refresh_token: string, extra: Record<string, string> = {}) =>
    tokenRequest(h.url, { grant_type: 'refresh_token', client_id: clientId, refresh_token, ...extra });
  const second = await refresh(first.refresh_token);
  expect(second.status).toBe(200);
  // first.refresh_token is now rotated; second.body.refresh_token is the live one.
  return { old: first.refresh_token, live: second.body.refresh_token as string, refresh };
}

describe('a rotated refresh token presented again', () => {
  it('with an unknown scope is refused and revokes the grant (the live refresh token stops working)', async () => {
    const { old, live, refresh } = await rotated();
    const replay = await refresh(old, { scope: 'offline_access' });
    expect({ status: replay.status, error: replay.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    const after = await refresh(live);
    expect({ status: after.status, error: after.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
  });

  it('with a resource of another server is refused and still revokes the grant', async () => {
    const { old, live, refresh } = await rotated();
    const replay = await refresh(old, { resource: 'https://other.example/mcp' });
    expect({ status: replay.status, error: replay.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    const after = await refresh(live);
    expect({ status: after.status, error: after.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
  });
});

describe('a live refresh token in a request refused for its scope or resource', () => {
  it('is refused with invalid_scope or invalid_target and rotates nothing', async () => {
    const { live, refresh } = await rotated();
    const unknownScope = await refresh(live, { scope: 'offline_access' });
    expect({ status: unknownScope.status, error: unknownScope.body.error }).toEqual({
      status: 400,
      error: 'invalid_scope',
    });
    const foreign = await refresh(live, { resource: 'https://other.example/mcp' });
    expect({ status: foreign.status, error: foreign.body.error }).toEqual({ status: 400, error: 'invalid_target' });
    expect((await refresh(live)).status).toBe(200);
  });
});
