// The bridge passes an upstream server's tasks through (task-augmented tools/call, tasks/get,
// tasks/result, tasks/list, tasks/cancel), and keeps each task to the credential that created
// it although the upstream sees one client (src/device/bridge/task-owners.ts).
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { CALLER_META_KEY } from '../../src/device/tools/contract.ts';
import { tsxCommand, useBridge } from './connect.ts';

const UPSTREAM = fileURLToPath(new URL('./task-upstream.ts', import.meta.url));
const caller = (credential: string) => ({ [CALLER_META_KEY]: { credential, scopes: ['devices:read'] } });

const bridge = useBridge(tsxCommand(UPSTREAM));

const rq = (method: string, params: Record<string, unknown>, credential = 'key-a') =>
  bridge.client.request({ method, params: { ...params, _meta: caller(credential) } }, ResultSchema) as Promise<any>;

describe('bridge: upstream tasks', () => {
  it('advertises the upstream tasks capability and the tool’s task support', async () => {
    expect(bridge.client.getServerCapabilities()?.tasks).toMatchObject({ list: {}, cancel: {} });
    const { tools } = await bridge.client.listTools();
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
