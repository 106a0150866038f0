// Strict inputs end to end: the official SDK client, the real relay, the real agent and the
// phone's server over a simulated phone. An unknown key is refused with the invalid_arguments
// envelope and nothing happens, a key named "__proto__" too; arguments that are no object get
// the same envelope, not a JSON-RPC internal error (envelopeSdkErrors in
// src/device/tools/server.ts; docs/TOOLS.md).
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import type { Scope } from '../../src/store/types.ts';
import { connectClient, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { caller, phoneServerFactory, removeScratch, scratchDir, SimPhone } from '../phone/helpers.ts';

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
  removeScratch();
});
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

/** A fresh paired phone serving the real surface; client(scopes) is a new key of it, tools listed. */
async function startPhone() {
  const stateDir = join(scratchDir('pb-strict-'), 'state');
  const sim = new SimPhone({ seed: 11 });
  const { device_id: deviceId } = await DeviceAgent.pair({
    stateDir,
    qr: await relay.pair(),
    name: 'sim',
    log: silentLogger,
  });
  const agent = new DeviceAgent({
    stateDir,
    createServer: phoneServerFactory(stateDir, sim, { runStepDelayMs: 5 }),
    log: silentLogger,
  });
  agent.start();
  cleanups.push(() => agent.stop());
  await waitFor(() => !!relay.relay.node.ctx.hub.device(deviceId)?.initResult, 10_000, 'phone online');
  return {
    sim,
    client: async (scopes?: Scope[]): Promise<{ client: Client; call: ReturnType<typeof caller> }> => {
      const key = await relay.key(deviceId, scopes);
      const { client } = await connectClient(relay.mcpUrl, key.token);
      cleanups.push(() => client.close());
      await client.listTools();
      return { client, call: caller(client) };
    },
  };
}

function envelope(result: CallToolResult): { code: string; message: string } {
  expect(result.isError, JSON.stringify(result.structuredContent)).toBe(true);
  expect(result.structuredContent).toBeUndefined();
  const block = result.content[0] as { type: string; text: string };
  expect(block.type).toBe('text');
  return (JSON.parse(block.text) as { error: { code: string; message: string } }).error;
}

describe('strict inputs through the relay', () => {
  it('control: "leaseid" is refused with invalid_arguments; nothing happens', async () => {
    const { sim, client } = await startPhone();
    const { call } = await client();
    expect(envelope(await call('open_app', { packageName: 'com.phonebridge.notes', leaseid: 'x' })).code).toBe(
      'invalid_arguments',
    );
    expect(sim.foregroundApp).toBe('com.android.launcher');
  });

  it('an unknown key named "__proto__" is refused with invalid_arguments; nothing happens', async () => {
    const { sim, client } = await startPhone();
    const { call } = await client();
    const args = JSON.parse('{"packageName":"com.phonebridge.notes","__proto__":{"leaseid":"x"}}') as Record<
      string,
      unknown
    >;
    const result = await call('open_app', args);
    expect(result.isError, JSON.stringify(result.content)).toBe(true);
    expect(envelope(result).code).toBe('invalid_arguments');
    expect(sim.foregroundApp).toBe('com.android.launcher');
  });

  it('arguments that are not an object get the invalid_arguments envelope, not a JSON-RPC internal error', async () => {
    const { client } = await startPhone();
    const { client: c } = await client();
    const answer = await c
      .request({ method: 'tools/call', params: { name: 'list_devices', arguments: null } }, ResultSchema)
      .then(
        (r) => r as CallToolResult,
        (e: unknown) => String(e),
      );
    expect(typeof answer, JSON.stringify(answer)).toBe('object');
    expect(envelope(answer as CallToolResult).code).toBe('invalid_arguments');
  });
});
