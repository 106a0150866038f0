// What a client without a working credential is told: a 401 that says invalid_token with a
// description, and in local mode OAuth discovery answered with how to authenticate.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
}, 60_000);
afterAll(async () => {
  await relay?.stop();
});

const init = (headers: Record<string, string>) =>
  fetch(relay.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } }),
  });

describe('the 401 and local-mode discovery', () => {
  it('a revoked or unknown bearer gets error="invalid_token" with a description; no key says how to send one', async () => {
    const bad = await init({ authorization: 'Bearer pb_unknown' });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toMatch(/error="invalid_token", error_description="[^"]+"/);
    const body = (await bad.json()) as { error: string; error_description: string };
    expect(body.error).toBe('invalid_token');
    expect(body.error_description).not.toMatch(/API key$/);
    const none = await init({});
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error_description: string }).error_description).toMatch(/X-Api-Key/);
  });

  it('local mode answers OAuth discovery and registration with how to authenticate', async () => {
    for (const [method, path] of [
      ['GET', '/.well-known/oauth-protected-resource/mcp'],
      ['GET', '/.well-known/oauth-authorization-server'],
      ['POST', '/register'],
    ]) {
      const r = await fetch(`${relay.url}${path}`, { method });
      expect(r.status, path).toBe(404);
      const body = (await r.json()) as { error: string; error_description: string };
      expect(body.error).toBe('oauth_not_supported');
      expect(body.error_description).toMatch(/X-Api-Key/);
    }
  });
});
