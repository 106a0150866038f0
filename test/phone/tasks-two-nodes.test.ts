// Tasks through a two-node cluster over real Redis and Postgres (docs/decisions/0182-tasks.md):
// the reference phone is on node A; a client starts a run as a task through A and goes away,
// another client of the same key polls it and gets its result through B; a cancel through B
// stops the run at the phone; another key sees none of it.
import { join } from 'node:path';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPhoneServer } from '../../src/device/tools/index.ts';
import { connectClient, startTestPhone, waitFor, type TestPhone } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { removeScratch, scratchDir, SimPhone } from './helpers.ts';

let nodes: TwoNodes;
let phone: TestPhone;
let sim: SimPhone;
let token: string;
let other: string;
const clients: Client[] = [];

beforeAll(async () => {
  nodes = await startTwoNodes();
  sim = new SimPhone({ seed: 9 });
  phone = await startTestPhone(nodes.a, () => createPhoneServer({ phone: sim, deviceId: 'sim', runStepDelayMs: 50 }), {
    stateDir: join(scratchDir(), 'state'),
  });
  token = (await nodes.a.key(phone.deviceId)).token;
  other = (await nodes.a.key(phone.deviceId)).token;
}, 60_000);
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await phone?.stop();
  await nodes?.stop();
  removeScratch();
});

async function clientOn(mcpUrl: string, key = token) {
  const { client } = await connectClient(mcpUrl, key);
  clients.push(client);
  const rq = (method: string, params: Record<string, unknown>) =>
    client.request({ method, params }, ResultSchema) as Promise<any>;
  return { client, rq };
}

const run = (waitMs: number) => ({
  goal: 'tasks across nodes',
  steps: [
    { action: 'open_app', packageName: 'com.android.settings' },
    { action: 'wait', ms: waitMs },
    { action: 'press_key', key: 'HOME' },
  ],
});

describe('tasks across two relay nodes', () => {
  it('the relay passes the phone’s task support through', async () => {
    const { client } = await clientOn(nodes.b.mcpUrl);
    expect(client.getServerCapabilities()?.tasks).toMatchObject({ list: {}, cancel: {} });
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === 'start_run')?.execution?.taskSupport).toBe('optional');
  });

  it('starts a run as a task through A; after A’s client leaves, B polls it and gets its result', async () => {
    const a = await clientOn(nodes.a.mcpUrl);
    const created = await a.rq('tools/call', { name: 'start_run', arguments: run(800), task: { ttl: 120_000 } });
    const taskId = created.task.taskId as string;
    expect(created.task.status).toBe('working');
    await a.client.close();

    const b = await clientOn(nodes.b.mcpUrl);
    expect((await b.rq('tasks/get', { taskId })).taskId).toBe(taskId); // the phone's id, not rewritten
    expect((await b.rq('tasks/list', {})).tasks.map((t: { taskId: string }) => t.taskId)).toContain(taskId);
    const result = await b.rq('tasks/result', { taskId });
    expect(result.structuredContent).toMatchObject({ status: 'completed', stepsDone: 3 });
    expect(result._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId });
    expect((await b.rq('tasks/get', { taskId })).status).toBe('completed');

    // Another key of the same phone sees none of it.
    const stranger = await clientOn(nodes.b.mcpUrl, other);
    expect((await stranger.rq('tasks/list', {})).tasks).toEqual([]);
    await expect(stranger.rq('tasks/get', { taskId })).rejects.toMatchObject({ code: -32602 });
  }, 60_000);

  it('a cancel through B stops the run at the phone', async () => {
    const a = await clientOn(nodes.a.mcpUrl);
    const created = await a.rq('tools/call', { name: 'start_run', arguments: run(10_000), task: {} });
    const taskId = created.task.taskId as string;
    await waitFor(() => sim.foregroundApp === 'com.android.settings', 10_000, 'the run opened settings');
    const b = await clientOn(nodes.b.mcpUrl);
    expect((await b.rq('tasks/cancel', { taskId })).status).toBe('cancelled');
    const runs = await b.rq('tools/call', { name: 'get_run', arguments: {} });
    await waitFor(
      async () => (await b.rq('tools/call', { name: 'get_run', arguments: {} })).structuredContent.status === 'stopped',
      10_000,
      'the run stopped',
    );
    expect(runs.structuredContent.stepsDone).toBeLessThan(3);
    // The HOME step never ran.
    expect(sim.foregroundApp).toBe('com.android.settings');
  }, 60_000);
});
