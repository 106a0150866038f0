// HOSTED.md (3. Registration): "Redirect URIs must be `https`, or `http` on `127.0.0.1`, `[::1]`
// or `localhost` with any port; no fragments." RFC 6749 §3.1.2: "The endpoint URI MUST NOT
// include a fragment component." A redirect URI ending in "#" has a fragment component (an
// empty one: the URL parser reports `hash === ''` for it). Client metadata documents' redirect
// URIs pass the same rule (src/hosted/client-metadata-rules.test.ts).
import { describe, expect, it } from 'vitest';
import { clientAddress, useHostedRelay } from './hosted-relay.ts';
import { registerClient } from './helpers.ts';

const h = useHostedRelay({ args: ['--trust-proxy'] });

describe('registration refuses redirect URIs with a fragment', () => {
  it('an empty fragment ("…/callback#") too', async () => {
    const withFragment = await registerClient(h.url, clientAddress(), {
      redirectUris: ['https://app.example.com/cb#x'],
    });
    expect(withFragment.status).toBe(400); // as documented
    const empty = await registerClient(h.url, clientAddress(), { redirectUris: ['https://app.example.com/cb#'] });
    expect({ status: empty.status, error: empty.body.error }).toEqual({ status: 400, error: 'invalid_redirect_uri' });
  });
});
