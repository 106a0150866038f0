// Revoking a fleet key reaches the phones it was used on, on two nodes over Redis and Postgres:
// each phone hears credential_revoked and releases the leases that caller held (as for a device
// key, docs/decisions/0178-fleet-key-revocation-reaches-phones.md), and the key's sessions end on
// every node. The real phone tool surface, the official SDK client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, waitFor } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { baseHeaders, post, STATELESS_REVISION, toolCall } from '../helpers/raw-mcp.ts';
import { startAccountPhone, type HostedPhone } from '../hosted/helpers.ts';
import { caller, ok } from '../phone/helpers.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { createKey } from '../../src/provisioning.ts';
import { SCOPES } from '../../src/store/index.ts';

let nodes: TwoNodes;
let onA: HostedPhone;
let onB: HostedPhone;
let admin: { token: string };

const deviceUrl = (base: string, id: string) => `${base}/mcp/devices/${id}`;

beforeAll(async () => {
  nodes = await startTwoNodes(['--control-poll-ms', '50']);
  const store = nodes.a.relay.store.store;
  onA = await startAccountPhone(store, nodes.a.url, 'local', 'rev-a', 'tools');
  onB = await startAccountPhone(store, nodes.b.url, 'local', 'rev-b', 'tools');
  await store.fleet.updateLabels(onA.deviceId, { set: { rack: 'rev', slot: 'a' }, remove: [] });
  await store.fleet.updateLabels(onB.deviceId, { set: { rack: 'rev', slot: 'b' }, remove: [] });
  await waitFor(() => !!nodes.a.relay.node.ctx.hub.device(onA.deviceId), 10_000, 'phone a on node a');
  await waitFor(() => !!nodes.b.relay.node.ctx.hub.device(onB.deviceId), 10_000, 'phone b on node b');
  admin = await createFleetKey(store, { accountId: 'local', scopes: [...SCOPES] });
}, 60_000);

afterAll(async () => {
  for (const p of [onA, onB]) await p?.stop().catch(() => {});
  await nodes?.stop();
});

/** The lease state of a phone as a read-only device key sees it ('free', 'others', 'yours'). */
async function leaseWatcher(deviceId: string) {
  const key = await createKey(nodes.a.relay.store.store, deviceId, ['devices:read']);
  const { client } = await connectClient(nodes.a.mcpUrl, key.token);
  const call = caller(client);
  await client.listTools();
  return {
    state: async () =>
      ok<{ devices: { lease: { state: string } }[] }>(await call('list_devices')).devices[0].lease.state,
    close: () => client.close(),
  };
}

describe('revoking a fleet key', () => {
  it('makes every phone it was used on release its leases, and ends its sessions on every node', async () => {
    const fleet = await createFleetKey(nodes.a.relay.store.store, {
      accountId: 'local',
      selector: 'rack=rev',
      scopes: [...SCOPES],
    });
    // Client on the other node than the phone, both ways; one through an allocation.
    const viaB = await connectClient(deviceUrl(nodes.b.url, onA.deviceId), fleet.token);
    const callA = caller(viaB.client);
    await viaB.client.listTools();
    ok(await callA('take_device'));

    // Phone b through an allocation of this key (the allocation records the use).
    const alloc = await fetch(`${nodes.a.url}/api/v1/allocations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fleet.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ selector: { slot: 'b' }, ttl_s: 300 }),
    }).then((r) => r.json() as Promise<{ id: string; device_id: string }>);
    expect(alloc.device_id).toBe(onB.deviceId);
    // The stateless revision: no session, the allocation header on the call.
    const took = await post(
      deviceUrl(nodes.a.url, onB.deviceId),
      {
        ...baseHeaders(fleet.token, STATELESS_REVISION),
        'mcp-method': 'tools/call',
        'mcp-name': 'take_device',
        'x-phonebridge-allocation': alloc.id,
      },
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'take_device',
          arguments: {},
          _meta: {
            'io.modelcontextprotocol/protocolVersion': STATELESS_REVISION,
            'io.modelcontextprotocol/clientInfo': { name: 'orchestrator', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    );
    expect(took.status).toBe(200);
    expect(took.json.result.isError).toBeFalsy();

    const watchA = await leaseWatcher(onA.deviceId);
    const watchB = await leaseWatcher(onB.deviceId);
    try {
      expect(await watchA.state()).toBe('others');
      expect(await watchB.state()).toBe('others');
      const sessionB = viaB.transport.sessionId!;

      // Revoked through the API on node b (an account-wide fleet key).
      const r = await fetch(`${nodes.b.url}/api/v1/keys/${fleet.id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${admin.token}` },
      });
      expect(r.status).toBe(204);

      await waitFor(async () => (await watchA.state()) === 'free', 10_000, 'phone a released the fleet key’s lease');
      await waitFor(async () => (await watchB.state()) === 'free', 10_000, 'phone b released the fleet key’s lease');
      // Its sessions are gone on both nodes: the revoked key is refused.
      for (const base of [nodes.a.url, nodes.b.url]) {
        const again = await post(
          deviceUrl(base, onA.deviceId),
          { ...baseHeaders(fleet.token), 'mcp-session-id': sessionB },
          toolCall(9, 'list_devices', {}),
        );
        expect(again.status).toBe(401);
      }
      // And nothing of it is left in the store.
      expect(await nodes.a.relay.store.store.fleet.listAllocations({ keyId: fleet.id }, new Date())).toEqual([]);
    } finally {
      await watchA.close();
      await watchB.close();
      await viaB.client.close().catch(() => {});
    }
  }, 90_000);
});
