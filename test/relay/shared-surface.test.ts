// Identical initialize results and tool catalogs are held once per node, not once per phone
// socket (docs/decisions/0060-shared-phone-surfaces.md): phones with the same surface share one frozen object, a phone with
// another surface gets its own, and the last socket to go takes the shared copy with it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { challenge, openSocket, pairRaw, signedHeaders, type OpenSocket } from '../helpers/raw-device.ts';
import { sharedSurfaceSizes } from '../../src/gateway/phone-surface.ts';

const tool = (name: string) => ({
  name,
  description: `the ${name} tool`,
  inputSchema: { type: 'object', properties: { x: { type: 'number' } } },
  _meta: { 'phonebridge/scope': 'devices:act' },
});

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
});

/** A raw phone that answers initialize and tools/list with the given surface. */
async function phoneWith(
  serverName: string,
  tools: unknown[],
  pages: unknown[][] = [tools],
): Promise<{ deviceId: string; socket: OpenSocket }> {
  const p = await pairRaw(relay.url, (await relay.pair()).code);
  const socket = await openSocket(relay.url, signedHeaders(p, await challenge(relay.url, p.deviceId)));
  const init = await socket.nextFrame((f) => f.method === 'initialize');
  socket.ws.send(
    JSON.stringify({
      jsonrpc: '2.0',
      id: init.id,
      result: {
        protocolVersion: init.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: serverName, version: '1' },
      },
    }),
  );
  for (const [i, page] of pages.entries()) {
    const list = await socket.nextFrame((f) => f.method === 'tools/list' && (i === 0 || f.params?.cursor === `p${i}`));
    const more = i + 1 < pages.length ? { nextCursor: `p${i + 1}` } : {};
    socket.ws.send(JSON.stringify({ jsonrpc: '2.0', id: list.id, result: { tools: page, ...more } }));
  }
  await waitFor(() => !!relay.relay.node.ctx.hub.device(p.deviceId)?.tools, 5000, 'catalog loaded');
  return { deviceId: p.deviceId, socket };
}

describe('shared phone surfaces', () => {
  it('shares one catalog and one initialize result among phones that send the same, and frees it with the last', async () => {
    const before = sharedSurfaceSizes();
    const a = await phoneWith('fleet', [tool('tap'), tool('swipe')]);
    const b = await phoneWith('fleet', [tool('tap'), tool('swipe')]);
    const c = await phoneWith('other', [tool('tap')]);
    const hub = relay.relay.node.ctx.hub;
    const [ca, cb, cc] = [a, b, c].map((p) => hub.device(p.deviceId)!);
    expect(ca.tools).toBe(cb.tools);
    expect(ca.initResult).toBe(cb.initResult);
    expect(cc.tools).not.toBe(ca.tools);
    expect(cc.initResult).not.toBe(ca.initResult);
    expect(cc.tools!.tools.map((t) => t.name)).toEqual(['tap']);
    expect(Object.isFrozen(ca.tools!.tools[0])).toBe(true);
    expect(sharedSurfaceSizes()).toEqual({
      initResults: before.initResults + 2,
      toolPages: before.toolPages + 2,
      catalogs: before.catalogs + 2,
    });

    a.socket.ws.close();
    await a.socket.closed;
    await waitFor(() => !hub.device(a.deviceId), 5000, 'a detached');
    expect(sharedSurfaceSizes().catalogs).toBe(before.catalogs + 2); // b still holds the shared one
    b.socket.ws.close();
    c.socket.ws.close();
    await Promise.all([b.socket.closed, c.socket.closed]);
    await waitFor(() => !hub.device(b.deviceId) && !hub.device(c.deviceId), 5000, 'all detached');
    expect(sharedSurfaceSizes()).toEqual(before);
  });

  it('shares a catalog of several pages too, page by page', async () => {
    const before = sharedSurfaceSizes();
    const pages = [[tool('tap')], [tool('swipe'), tool('type')]];
    const a = await phoneWith('paged', [], pages);
    const b = await phoneWith('paged', [], pages);
    const hub = relay.relay.node.ctx.hub;
    const [ca, cb] = [a, b].map((p) => hub.device(p.deviceId)!);
    expect(ca.tools!.tools.map((t) => t.name)).toEqual(['tap', 'swipe', 'type']);
    expect(cb.tools).toBe(ca.tools);
    expect(sharedSurfaceSizes()).toEqual({
      initResults: before.initResults + 1,
      toolPages: before.toolPages + 2,
      catalogs: before.catalogs + 1,
    });
    for (const p of [a, b]) p.socket.ws.close();
    await Promise.all([a.socket.closed, b.socket.closed]);
    await waitFor(() => !hub.device(a.deviceId) && !hub.device(b.deviceId), 5000, 'detached');
    expect(sharedSurfaceSizes()).toEqual(before);
  });
});
