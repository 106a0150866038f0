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

// The 2026-07-28 tasks extension (SEP-2663, docs/decisions/0183-tasks-extension.md), as a
// stateless client sends it: every request its own, with the revision and the extension in _meta
// and the routing headers (Mcp-Name = the task id for tasks/*).
async function modern(
  mcpUrl: string,
  method: string,
  params: Record<string, unknown>,
  opts: { key?: string; declares?: boolean } = {},
) {
  const name = typeof params.taskId === 'string' ? params.taskId : params.name;
  const r = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      'x-api-key': opts.key ?? token,
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities':
            opts.declares === false ? {} : { extensions: { 'io.modelcontextprotocol/tasks': {} } },
        },
      },
    }),
  });
  const body = (await r.json()) as { result?: any; error?: { code: number; data?: any } };
  return { status: r.status, ...body };
}

describe('the tasks extension across two relay nodes', () => {
  it('discover shows the extension, not the 2025-11-25 tasks slot', async () => {
    const d = await modern(nodes.b.mcpUrl, 'server/discover', {});
    expect(d.result.capabilities.extensions).toEqual({ 'io.modelcontextprotocol/tasks': {} });
    expect(d.result.capabilities.tasks).toBeUndefined();
  });

  it('starts a run as a task through A; B polls it to its inlined result; another key gets not found', async () => {
    const created = await modern(nodes.a.mcpUrl, 'tools/call', { name: 'start_run', arguments: run(800) });
    expect(created.result).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = created.result.taskId as string;
    await waitFor(
      async () => (await modern(nodes.b.mcpUrl, 'tasks/get', { taskId })).result?.status === 'completed',
      20_000,
      'the task completed',
    );
    const done = await modern(nodes.b.mcpUrl, 'tasks/get', { taskId });
    expect(done.result).toMatchObject({ resultType: 'complete', taskId, status: 'completed' });
    expect(done.result.result.structuredContent).toMatchObject({ status: 'completed', stepsDone: 3 });
    const stranger = await modern(nodes.b.mcpUrl, 'tasks/get', { taskId }, { key: other });
    expect(stranger.error?.code).toBe(-32602);
    // Removed in this revision.
    expect((await modern(nodes.b.mcpUrl, 'tasks/result', { taskId })).status).toBe(404);
    // A client that did not declare the extension: refused by the relay, 400 / -32021.
    const undeclared = await modern(nodes.b.mcpUrl, 'tasks/get', { taskId }, { declares: false });
    expect(undeclared.status).toBe(400);
    expect(undeclared.error).toMatchObject({
      code: -32021,
      data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
    });
  }, 60_000);

  it('a cancel through B is an ack and stops the run at the phone', async () => {
    const created = await modern(nodes.a.mcpUrl, 'tools/call', { name: 'start_run', arguments: run(10_000) });
    const taskId = created.result.taskId as string;
    await waitFor(() => sim.foregroundApp === 'com.android.settings', 10_000, 'the run opened settings');
    const ack = await modern(nodes.b.mcpUrl, 'tasks/cancel', { taskId });
    expect(ack.result).toEqual({
      resultType: 'complete',
      _meta: expect.objectContaining({ 'io.modelcontextprotocol/serverInfo': expect.any(Object) }),
    });
    expect((await modern(nodes.b.mcpUrl, 'tasks/get', { taskId })).result.status).toBe('cancelled');
    const b = await clientOn(nodes.b.mcpUrl);
    await waitFor(
      async () => (await b.rq('tools/call', { name: 'get_run', arguments: {} })).structuredContent.status === 'stopped',
      10_000,
      'the run stopped',
    );
    expect(sim.foregroundApp).toBe('com.android.settings');
  }, 60_000);
});
