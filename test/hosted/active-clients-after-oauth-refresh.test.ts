// docs/HOSTED.md (Pages, GET /account): "clients active in the last 10 minutes — sessions on any
// node with a request in that window, one client per credential, each listed with the name and
// version it gave in `initialize`"; docs/decisions/0169-active-clients.md: grouped by
// "(credential, client name, version)". An OAuth client's credential is its grant id, "which a
// refresh does not change" (docs/HOSTED.md, 5. Token; docs/decisions/0162-a-caller-is-its-grant.md).
// A client whose access token was refreshed opens a new session with the new token (sessions stay
// bound to the access token, decision 0162): it is still one client.
import { afterAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { useHostedRelay } from './hosted-relay.ts';
import { tokenRequest } from './helpers.ts';
import { accountWithClient, tokensFor } from './oauth-connection.ts';

const h = useHostedRelay({ args: ['--trust-proxy'] });
const clients: Client[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
});

async function connect(accessToken: string): Promise<Client> {
  const client = new Client({ name: 'claude-code', version: '2.0.1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${h.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${accessToken}` } },
    }),
  );
  clients.push(client);
  return client;
}

function activeCell(html: string): { count: string; names: string[] } {
  const count = /data-testid="active-clients">([^<]+)</.exec(html)?.[1] ?? '';
  const names = [...html.matchAll(/data-testid="client-name">([^<]+)</g)].map((m) => m[1]);
  return { count, names };
}

describe('dashboard: active clients of a phone', () => {
  it('counts an OAuth client that refreshed its access token within the window once', async () => {
    const { web, phone, clientId } = await accountWithClient(h);
    const first = await tokensFor(h, web, clientId, phone.deviceId);
    const before = await connect(first.access_token);
    await before.listTools();
    expect(activeCell((await web.get('/account')).html)).toEqual({ count: '1', names: ['claude-code 2.0.1'] });

    // An hour later the client refreshes and goes on with the new access token.
    const refreshed = await tokenRequest(h.url, {
      grant_type: 'refresh_token',
      client_id: clientId,
      refresh_token: first.refresh_token,
    });
    expect(refreshed.status).toBe(200);
    await before.close();
    const after = await connect(refreshed.body.access_token as string);
    await after.listTools();

    // Same grant (credential), same name and version: one client, with two sessions.
    expect(activeCell((await web.get('/account')).html)).toEqual({ count: '1', names: ['claude-code 2.0.1'] });
  });
});
