// The dashboard's clients of a phone are the sessions used within a stated window, by the names
// the clients gave in `initialize`, not every session still alive (24 h). Two official SDK clients
// with distinct names on a Redis bus; the window is shortened through the hosted options (the
// production default is ten minutes), so one client can fall idle in seconds.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type TestRelay } from '../helpers/relay.ts';
import { startHostedRelay, type HostedRelay } from './hosted-relay.ts';
import { createKey } from '../../src/provisioning.ts';
import { startAccountPhone, WebClient, type HostedPhone, type SmtpSink } from './helpers.ts';

const WINDOW_MS = 4_000;
let h: HostedRelay;
let relay: TestRelay;
let sink: SmtpSink;
let phones: HostedPhone[];
const clients: Client[] = [];

beforeAll(async () => {
  // On Redis: the dashboard's count is a bus query the local bus answers differently.
  h = await startHostedRelay({ redis: true, relayOptions: { hosted: { activeClientWindowMs: WINDOW_MS } } });
  ({ relay, sink, phones } = h);
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await h?.stop();
});

async function connect(token: string, name: string, version: string): Promise<Client> {
  const client = new Client({ name, version });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(relay.mcpUrl), { requestInit: { headers: { 'x-api-key': token } } }),
  );
  clients.push(client);
  return client;
}

/** The phone row's active-client count and the client names listed in it. */
function activeCell(html: string): { count: string; names: string[] } {
  const count = /data-testid="active-clients">([^<]+)</.exec(html)?.[1] ?? '';
  const names = [...html.matchAll(/data-testid="client-name">([^<]+)</g)].map((m) => m[1]);
  return { count, names };
}

describe('active clients on the dashboard', () => {
  it('counts the clients used within the window, by name; a client idle past it is not counted', async () => {
    const who = `ac${randomBytes(4).toString('hex')}@example.com`;
    const web = new WebClient(relay.url);
    await web.signIn(who, sink);
    const account = (await relay.relay.store.store.accountByEmail(who))!;
    const phone = await startAccountPhone(relay.relay.store.store, relay.url, account.id, 'Pixel');
    phones.push(phone);
    const key = await createKey(relay.relay.store.store, phone.deviceId);

    const idle = await connect(key.token, 'idle-agent', '0.9.0');
    await idle.listTools();
    const page0 = await web.get('/account');
    expect(page0.html).toContain(`Clients active in the last ${WINDOW_MS / 1000} s`);
    expect(activeCell(page0.html)).toEqual({ count: '1', names: ['idle-agent 0.9.0'] });

    // Past the window for the idle client; then the other one connects and works.
    const idleSince = Date.now();
    await new Promise((r) => setTimeout(r, WINDOW_MS + 500));
    const busy = await connect(key.token, 'busy-agent', '2.1.0');
    await busy.listTools();
    const page = await web.get('/account');
    expect(Date.now() - idleSince).toBeGreaterThan(WINDOW_MS);
    expect(activeCell(page.html)).toEqual({ count: '1', names: ['busy-agent 2.1.0'] });
    // The idle session still exists (it expires after 24 h): only the window keeps it off the count.
    expect((await relay.relay.node.ctx.bus.sessions.listForDevice(phone.deviceId, 10)).length).toBe(2);

    // It comes back as soon as it makes a request.
    await idle.listTools();
    const again = activeCell((await web.get('/account')).html);
    expect(again.count).toBe('2');
    expect(again.names).toEqual(['idle-agent 0.9.0', 'busy-agent 2.1.0']);
  }, 60_000);
});
