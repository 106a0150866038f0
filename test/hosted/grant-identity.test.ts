// The caller the phone sees for an OAuth client is its grant: a token refresh keeps the lease, and
// revoking the grant (or an API key) makes the phone release what that caller held, whichever node
// the revocation happened on. Two nodes (Postgres, Redis) behind one front; the official SDK client
// with its OAuth support; the real phone tool surface.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { waitFor, type TestRelay } from '../helpers/relay.ts';
import { startHostedRelay, type HostedRelay } from './hosted-relay.ts';
import { createKey } from '../../src/provisioning.ts';
import { caller, ok, toolError } from '../phone/helpers.ts';
import {
  allowPage,
  csrfOf,
  hopTarget,
  startAccountPhone,
  WebClient,
  TestOAuthProvider,
  type HostedPhone,
  type SmtpSink,
} from './helpers.ts';

let h: HostedRelay;
let node1: TestRelay;
let node2: TestRelay;
let FRONT: string;
let sink: SmtpSink;
let phones: HostedPhone[];

beforeAll(async () => {
  h = await startHostedRelay({ nodes: 2, args: ['--control-poll-ms', '50'] });
  [node1, node2] = h.nodes;
  ({ url: FRONT, sink, phones } = h);
}, 60_000);

afterAll(async () => {
  await h?.stop();
});

class Provider extends TestOAuthProvider {
  constructor() {
    super({ name: 'Lease keeper', scope: 'devices:read devices:act devices:lease' });
  }
}

/** A direct address of each node (the front is round-robin; some checks must pick the node). */
const direct = (n: TestRelay) => `http://127.0.0.1:${n.relay.node.port}`;

async function connect(provider: Provider): Promise<Client> {
  const client = new Client({ name: 'lease-keeper', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${FRONT}/mcp`), { authProvider: provider }));
  await client.listTools(); // the SDK validates structured results against the listed schemas
  return client;
}

async function connectKey(token: string): Promise<Client> {
  const client = new Client({ name: 'key-holder', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${FRONT}/mcp`), {
      requestInit: { headers: { 'x-api-key': token } },
    }),
  );
  await client.listTools();
  return client;
}

/** A signed-in person with a phone running the real tool surface, and an SDK client they allowed. */
async function grantedClient() {
  const who = `g${randomBytes(4).toString('hex')}@example.com`;
  const web = new WebClient(FRONT);
  await web.signIn(who, sink);
  const store = node1.relay.store.store;
  const account = (await store.accountByEmail(who))!;
  const phone = await startAccountPhone(store, FRONT, account.id, 'Pixel', 'tools');
  phones.push(phone);
  const provider = new Provider();
  const first = new Client({ name: 'lease-keeper', version: '1.0.0' });
  await expect(
    first.connect(new StreamableHTTPClientTransport(new URL(`${FRONT}/mcp`), { authProvider: provider })),
  ).rejects.toBeInstanceOf(UnauthorizedError);
  const r = await allowPage(web, provider.authorizationUrl!, phone.deviceId, [
    'devices:read',
    'devices:act',
    'devices:lease',
  ]);
  const code = hopTarget(r.html).searchParams.get('code')!;
  await new StreamableHTTPClientTransport(new URL(`${FRONT}/mcp`), { authProvider: provider }).finishAuth(code);
  return { web, account, phone, provider };
}

/** The node holding the phone's socket, and the other one. */
function nodesOf(deviceId: string): { holder: TestRelay; other: TestRelay } {
  const onOne = !!node1.relay.node.ctx.hub.device(deviceId);
  return onOne ? { holder: node1, other: node2 } : { holder: node2, other: node1 };
}

describe('the caller of an OAuth client is its grant', () => {
  it('keeps a lease across a forced refresh (SDK OAuth client: 401, refresh, retry)', async () => {
    const { provider, phone } = await grantedClient();
    const client = await connect(provider);
    const call = caller(client);
    const lease = ok<{ leaseId: string }>(await call('take_device'));
    ok(await call('tap', { x: 10, y: 10, leaseId: lease.leaseId }));

    // Force the refresh: the access token stops working (as at its expiry); the SDK's transport
    // gets a 401, refreshes with its refresh token and retries.
    const before = provider.saved!.access_token;
    const store = node1.relay.store.store;
    const access = (await store.listTokens({ deviceId: phone.deviceId })).filter((t) => t.via === 'oauth');
    expect(access).toHaveLength(1);
    expect(await store.revokeToken(access[0].id)).toBe(true);
    await waitFor(
      async () =>
        (
          await fetch(`${direct(node1)}/mcp`, {
            method: 'POST',
            headers: { authorization: `Bearer ${before}`, 'content-type': 'application/json' },
            body: '{}',
          })
        ).status === 401 &&
        (
          await fetch(`${direct(node2)}/mcp`, {
            method: 'POST',
            headers: { authorization: `Bearer ${before}`, 'content-type': 'application/json' },
            body: '{}',
          })
        ).status === 401,
      5_000,
      'old access token refused on both nodes',
    );
    // The old session belonged to the old token: the retry after the refresh may find it gone.
    await call('list_devices').catch(() => undefined);
    expect(provider.saved!.access_token).not.toBe(before);

    const again = caller(await connect(provider));
    const tapped = await again('tap', { x: 20, y: 20, leaseId: lease.leaseId });
    expect(tapped.isError ? toolError(tapped) : 'ok').toBe('ok');
    const listed = ok<{ devices: { lease: { state: string; leaseId: string | null } }[] }>(await again('list_devices'));
    expect(listed.devices[0].lease).toMatchObject({ state: 'yours', leaseId: lease.leaseId });
  }, 60_000);

  it('revoking the grant (journal only, as the CLI would) makes the phone release its lease', async () => {
    const { provider, phone } = await grantedClient();
    const lease = ok<{ leaseId: string }>(await caller(await connect(provider))('take_device'));
    expect(lease.leaseId).toBeTruthy();
    const key = await createKey(node1.relay.store.store, phone.deviceId, ['devices:read', 'devices:lease']);
    const watcher = caller(await connectKey(key.token));
    const state = async () =>
      ok<{ devices: { lease: { state: string } }[] }>(await watcher('list_devices')).devices[0].lease.state;
    expect(await state()).toBe('others');
    const grant = (
      await node1.relay.store.store.hosted.listOAuthGrants(
        (await node1.relay.store.store.getDevice(phone.deviceId))!.accountId,
      )
    )[0];
    expect(await node1.relay.store.store.hosted.revokeOAuthGrant(grant.id)).toBe(true);
    await waitFor(async () => (await state()) === 'free', 5_000, 'lease released after the grant was revoked');
  }, 60_000);

  it('revoking an API key on the node without the phone makes the phone release its lease', async () => {
    const { web, phone } = await grantedClient();
    const store = node1.relay.store.store;
    const holderKey = await createKey(store, phone.deviceId, ['devices:read', 'devices:act', 'devices:lease']);
    const holder = caller(await connectKey(holderKey.token));
    ok(await holder('take_device'));
    const watcherKey = await createKey(store, phone.deviceId, ['devices:read']);
    const watcher = caller(await connectKey(watcherKey.token));
    const state = async () =>
      ok<{ devices: { lease: { state: string } }[] }>(await watcher('list_devices')).devices[0].lease.state;
    expect(await state()).toBe('others');
    // The dashboard's Revoke, posted to the node that does not hold the phone's socket.
    const { other } = nodesOf(phone.deviceId);
    const there = new WebClient(direct(other), new URL(FRONT).origin);
    for (const [k, v] of web.jar) there.jar.set(k, v);
    const csrf = csrfOf((await there.get('/account')).html);
    expect((await there.post('/account/keys/revoke', { csrf, key: holderKey.id })).status).toBe(303);
    await waitFor(async () => (await state()) === 'free', 5_000, 'lease released after the key was revoked');
  }, 60_000);
});
