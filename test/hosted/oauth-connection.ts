// An OAuth connection made the way a client makes it: a signed-in account with a phone, a
// registered client, consent with Allow, the code exchanged for tokens (docs/HOSTED.md, 5.).
import { expect } from 'vitest';
import type { HostedRelay } from './hosted-relay.ts';
import { signedInWithPhone } from './hosted-relay.ts';
import {
  allowPage,
  authorizeParams,
  CALLBACK,
  hopTarget,
  pkce,
  registerClient,
  tokenRequest,
  type WebClient,
} from './helpers.ts';

/** A signed-in account with a phone, and a client registered from the same address. */
export async function accountWithClient(h: HostedRelay, opts: { name?: string } = {}) {
  const signed = await signedInWithPhone(h, opts.name ? { name: opts.name } : {});
  const client = await registerClient(h.url, signed.web.forwardedFor!);
  expect(client.status).toBe(201);
  return { ...signed, clientId: client.body.client_id };
}

/** Consent with Allow, then the code exchanged: the token response. */
export async function tokensFor(
  h: HostedRelay,
  web: WebClient,
  clientId: string,
  deviceId: string,
  scopes: string[] = ['devices:read', 'devices:act'],
) {
  const { verifier, challenge } = pkce();
  const answer = await allowPage(web, authorizeParams(h.url, clientId, challenge), deviceId, scopes);
  const code = hopTarget(answer.html).searchParams.get('code');
  expect(code).toBeTruthy();
  const t = await tokenRequest(h.url, {
    grant_type: 'authorization_code',
    code: code!,
    redirect_uri: CALLBACK,
    client_id: clientId,
    code_verifier: verifier,
    resource: `${h.url}/mcp`,
  });
  expect(t.status).toBe(200);
  return t.body as { access_token: string; refresh_token: string; scope: string };
}
