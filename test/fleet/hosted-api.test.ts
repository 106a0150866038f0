// /api/v1 on a hosted relay, where an account's credentials are not only keys: OAuth access
// tokens (ordinary device tokens made by a grant, docs/decisions/0070-hosted-accounts-and-oauth.md)
// are no keys of the API. Real relay, real Postgres, real SMTP sink, the OAuth flow over HTTP.
import { describe, expect, it } from 'vitest';
import { signedInWithPhone, useHostedRelay } from '../hosted/hosted-relay.ts';
import {
  bearerInitialize,
  allowPage,
  authorizeParams,
  CALLBACK,
  hopTarget,
  pkce,
  registerClient,
  tokenRequest,
} from '../hosted/helpers.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

const h = useHostedRelay({ args: ['--trust-proxy', '--control-poll-ms', '50'] });

const mcpInit = (token: string) => bearerInitialize(h.url, token).then((r) => r.status);

describe('DELETE /api/v1/keys/{id} on a hosted relay', () => {
  it('an OAuth access token’s id is no key: 404 key_not_found, as an unknown id, and the token keeps working', async () => {
    const { web, account, phone } = await signedInWithPhone(h);
    const store = h.relay.relay.store.store;
    const client = await registerClient(h.url, web.forwardedFor!);
    const { verifier, challenge } = pkce();
    const answer = await allowPage(web, authorizeParams(h.url, client.body.client_id, challenge), phone.deviceId);
    const t = await tokenRequest(h.url, {
      grant_type: 'authorization_code',
      code: hopTarget(answer.html).searchParams.get('code')!,
      redirect_uri: CALLBACK,
      client_id: client.body.client_id,
      code_verifier: verifier,
    });
    expect(t.status).toBe(200);
    const access = t.body.access_token as string;
    expect(await mcpInit(access)).toBe(200);
    const [oauth] = (await store.listTokens({ accountId: account.id })).filter((x) => x.via === 'oauth');
    expect(oauth).toBeDefined();

    const fleet = await createFleetKey(store, { accountId: account.id, scopes: [...SCOPES] });
    const del = (id: string) =>
      fetch(`${h.url}/api/v1/keys/${encodeURIComponent(id)}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${fleet.token}` },
      });
    // The keys the API lists are the ones it revokes: the access token is not among them.
    const listed = (await (
      await fetch(`${h.url}/api/v1/keys`, { headers: { authorization: `Bearer ${fleet.token}` } })
    ).json()) as { items: Array<{ id: string }> };
    expect(listed.items.map((k) => k.id)).not.toContain(oauth.id);

    for (const id of [oauth.id, 'key_unknown']) {
      const r = await del(id);
      expect(r.status).toBe(404);
      expect(await r.json()).toEqual({ error: 'key_not_found', message: `no key ${id} in this account` });
    }
    // Nothing was revoked: the token is stored and still opens a session (the hub heard of no revocation).
    expect((await store.listTokens({ accountId: account.id })).map((x) => x.id)).toContain(oauth.id);
    expect(await mcpInit(access)).toBe(200);
    expect(await store.hosted.listOAuthGrants(account.id)).toHaveLength(1);

    // A device key of the same account is still revoked by the same route.
    const made = await fetch(`${h.url}/api/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fleet.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device_id: phone.deviceId, scopes: ['devices:read'] }),
    });
    expect(made.status).toBe(201);
    const key = (await made.json()) as { id: string };
    expect((await del(key.id)).status).toBe(204);
    expect((await store.listTokens({ accountId: account.id })).map((x) => x.id)).not.toContain(key.id);
  }, 60_000);
});
