// Fleet keys on /mcp/devices/<deviceId>, two nodes over Redis and Postgres: a fleet key with a
// selector reaches matching phones on both nodes (both eras, the SDK client, the phone seeing
// the fleet key as caller) and is refused elsewhere; device keys keep their one phone; revoking
// the fleet key ends what it holds on every node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, startTestPhone, waitFor, type TestPhone } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { baseHeaders, getStream, openSession, post, STATELESS_REVISION, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';
import { createFleetKey } from '../../src/fleet/keys.ts';
import { SCOPES } from '../../src/store/index.ts';

let nodes: TwoNodes;
const control: EchoServerControl = { calls: [], cancellations: 0 };
let berlinA: TestPhone; // on node a
let berlinB: TestPhone; // on node b
let paris: TestPhone; // on node a
let fleet: { id: string; token: string };

const deviceUrl = (base: string, id: string) => `${base}/mcp/devices/${id}`;

beforeAll(async () => {
  nodes = await startTwoNodes();
  const store = nodes.a.relay.store.store;
  berlinA = await startTestPhone(nodes.a, () => createEchoServer(control), { name: 'berlin-a' });
  berlinB = await startTestPhone(nodes.b, () => createEchoServer(control), { name: 'berlin-b' });
  paris = await startTestPhone(nodes.a, () => createEchoServer(control), { name: 'paris' });
  await store.fleet.updateLabels(berlinA.deviceId, { set: { site: 'berlin', model: 'pixel8' }, remove: [] });
  await store.fleet.updateLabels(berlinB.deviceId, { set: { site: 'berlin', model: 'pixel7' }, remove: [] });
  await store.fleet.updateLabels(paris.deviceId, { set: { site: 'paris' }, remove: [] });
  fleet = await createFleetKey(store, { accountId: 'local', selector: 'site=berlin', scopes: [...SCOPES] });
}, 60_000);

afterAll(async () => {
  for (const p of [berlinA, berlinB, paris]) await p?.stop().catch(() => {});
  await nodes?.stop();
});

describe('a fleet key with a selector', () => {
  it('reaches matching phones on both nodes through the SDK client; the phone sees the fleet key as caller', async () => {
    for (const [phone, base] of [
      [berlinA, nodes.b.url], // client on b, phone on a: crosses the bus
      [berlinB, nodes.b.url], // both on b
      [berlinB, nodes.a.url], // client on a, phone on b
    ] as const) {
      const { client } = await connectClient(deviceUrl(base, phone.deviceId), fleet.token);
      try {
        expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo');
        const before = control.calls.length;
        const r = await client.callTool({ name: 'echo', arguments: { text: `hi ${phone.deviceId}` } });
        expect(JSON.stringify(r.content)).toContain(`hi ${phone.deviceId}`);
        const seen = control.calls.slice(before).find((c) => c.name === 'echo');
        expect((seen?.meta as Record<string, any>)['phonebridge/caller']).toEqual({
          credential: fleet.id,
          scopes: [...SCOPES],
        });
      } finally {
        await client.close();
      }
    }
  });

  it('works in the stateless revision too', async () => {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': STATELESS_REVISION,
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const r = await post(
      deviceUrl(nodes.a.url, berlinB.deviceId),
      { ...baseHeaders(fleet.token, STATELESS_REVISION), 'mcp-method': 'tools/call', 'mcp-name': 'echo' },
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'stateless' }, _meta: meta },
      }),
    );
    expect(r.status).toBe(200);
    expect(JSON.stringify(r.json.result)).toContain('stateless');
  });

  it('is refused on a phone outside its selector, naming the fix', async () => {
    const r = await post(
      deviceUrl(nodes.b.url, paris.deviceId),
      baseHeaders(fleet.token),
      JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      }),
    );
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ error: 'outside_selector' });
    expect(r.json.message).toContain('site=berlin');
  });

  it('is refused on plain /mcp with a pointer to /mcp/devices/<id>', async () => {
    const r = await post(nodes.a.mcpUrl, baseHeaders(fleet.token), toolCall(1, 'echo', { text: 'x' }));
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('fleet_key_needs_device_url');
    expect(r.json.message).toContain('/mcp/devices/');
  });

  it('a session made for one phone is not found on another phone’s URL', async () => {
    const session = await openSession(deviceUrl(nodes.a.url, berlinA.deviceId), fleet.token);
    const r = await post(deviceUrl(nodes.a.url, berlinB.deviceId), session, toolCall(1, 'echo', { text: 'x' }));
    expect(r.status).toBe(404);
    const ok = await post(deviceUrl(nodes.b.url, berlinA.deviceId), session, toolCall(2, 'echo', { text: 'y' }));
    expect(ok.status).toBe(200);
  });

  it('follows labels: a phone labelled into the selector becomes reachable', async () => {
    const store = nodes.b.relay.store.store;
    const extra = await startTestPhone(nodes.b, () => createEchoServer(control), { name: 'late' });
    try {
      const url = deviceUrl(nodes.a.url, extra.deviceId);
      expect((await post(url, baseHeaders(fleet.token), toolCall(1, 'echo', { text: 'x' }))).status).toBe(403);
      await store.fleet.updateLabels(extra.deviceId, { set: { site: 'berlin' }, remove: [] });
      const { client } = await connectClient(url, fleet.token);
      expect((await client.callTool({ name: 'echo', arguments: { text: 'late' } })).isError).toBeFalsy();
      await client.close();
    } finally {
      await extra.stop();
    }
  });
});

describe('device keys on per-phone URLs', () => {
  it('work on their own phone’s URL and are refused on another’s', async () => {
    const key = await nodes.a.key(berlinA.deviceId);
    const { client } = await connectClient(deviceUrl(nodes.b.url, berlinA.deviceId), key.token);
    expect((await client.callTool({ name: 'echo', arguments: { text: 'own' } })).isError).toBeFalsy();
    await client.close();
    const r = await post(
      deviceUrl(nodes.b.url, berlinB.deviceId),
      baseHeaders(key.token),
      toolCall(1, 'echo', { text: 'x' }),
    );
    expect(r.status).toBe(403);
    expect(r.json.error).toBe('wrong_device');
  });
});

describe('revoking a fleet key', () => {
  it('ends its streams and calls on every node, and the key is refused afterwards', async () => {
    const key = await createFleetKey(nodes.a.relay.store.store, {
      accountId: 'local',
      selector: 'site=berlin',
      scopes: [...SCOPES],
    });
    const url = deviceUrl(nodes.b.url, berlinA.deviceId); // client on b, phone on a
    const session = await openSession(url, key.token);
    const get = await getStream(url, session);
    expect(get.status).toBe(200);
    const before = control.calls.length;
    const call = post(url, session, toolCall(7, 'sleep', { ms: 20_000 }));
    await waitFor(() => control.calls.length > before, 5000, 'the slow call reached the phone');

    expect(await nodes.a.relay.store.store.fleet.revokeKey(key.id)).toBe(true);

    expect((await call).json?.error?.data?.code).toBe('cancelled');
    await Promise.race([
      get.ended,
      new Promise((_, reject) => setTimeout(() => reject(new Error('stream still open after revoke')), 5000)),
    ]);
    const after = await post(
      deviceUrl(nodes.a.url, berlinB.deviceId),
      baseHeaders(key.token),
      toolCall(8, 'echo', { text: 'x' }),
    );
    expect(after.status).toBe(401);
  });
});
