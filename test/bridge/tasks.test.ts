// The bridge passes an upstream server's tasks through (task-augmented tools/call, tasks/get,
// tasks/result, tasks/list, tasks/cancel), and keeps each task to the credential that created
// it although the upstream sees one client (src/device/bridge/task-owners.ts).
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { silentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, type BridgeServerFactory } from '../../src/device/bridge/index.ts';
import { CALLER_META_KEY } from '../../src/device/tools/contract.ts';
import { connectToBridge } from './connect.ts';

const TSX = fileURLToPath(new URL('../../node_modules/tsx/dist/cli.mjs', import.meta.url));
const UPSTREAM = fileURLToPath(new URL('./task-upstream.ts', import.meta.url));
const caller = (credential: string) => ({ [CALLER_META_KEY]: { credential, scopes: ['devices:read'] } });

let factory: BridgeServerFactory;
let client: Client;
beforeAll(async () => {
  factory = await bridgeServerFactory({
    upstreamCmd: `'${process.execPath}' '${TSX}' '${UPSTREAM}'`,
    log: silentLogger,
  });
  client = await connectToBridge(factory);
}, 60_000);
afterAll(async () => {
  await client?.close();
  await factory?.close();
});

const rq = (method: string, params: Record<string, unknown>, credential = 'key-a') =>
  client.request({ method, params: { ...params, _meta: caller(credential) } }, ResultSchema) as Promise<any>;

describe('bridge: upstream tasks', () => {
  it('advertises the upstream tasks capability and the tool’s task support', async () => {
    expect(client.getServerCapabilities()?.tasks).toMatchObject({ list: {}, cancel: {} });
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === 'slow-echo')?.execution?.taskSupport).toBe('optional');
  });

  it('runs a task through: created, polled, its result; listed only for its creator', async () => {
    const created = await rq('tools/call', { name: 'slow-echo', arguments: { text: 'hi', ms: 300 }, task: {} });
    const taskId = created.task.taskId as string;
    expect(created.task.status).toBe('working');
    expect((await rq('tasks/get', { taskId })).status).toMatch(/working|completed/);
    const result = await rq('tasks/result', { taskId });
    expect(result.content[0].text).toBe('echo: hi');
    expect((await rq('tasks/get', { taskId })).status).toBe('completed');
    expect((await rq('tasks/list', {})).tasks.map((t: { taskId: string }) => t.taskId)).toContain(taskId);

    expect((await rq('tasks/list', {}, 'key-b')).tasks).toEqual([]);
    await expect(rq('tasks/get', { taskId }, 'key-b')).rejects.toMatchObject({ code: -32602 });
    await expect(rq('tasks/result', { taskId }, 'key-b')).rejects.toMatchObject({ code: -32602 });
    await expect(rq('tasks/cancel', { taskId }, 'key-b')).rejects.toMatchObject({ code: -32602 });
  });

  it('cancels through the bridge', async () => {
    const created = await rq('tools/call', { name: 'slow-echo', arguments: { text: 'late', ms: 10_000 }, task: {} });
    const taskId = created.task.taskId as string;
    expect((await rq('tasks/cancel', { taskId })).status).toBe('cancelled');
    expect((await rq('tasks/get', { taskId })).status).toBe('cancelled');
  });

  it('a plain call of the same tool still answers', async () => {
    const plain = await rq('tools/call', { name: 'slow-echo', arguments: { text: 'plain', ms: 10 } });
    expect(plain.content[0].text).toBe('echo: plain');
  });
});
