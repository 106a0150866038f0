// The bridge passes the 2026-07-28 tasks extension (SEP-2663) of an upstream through as it is —
// a flat CreateTaskResult, tasks/get with the inlined result, tasks/update, tasks/cancel — and
// keeps each task to the credential that created it, although the upstream sees one client
// (docs/decisions/0183-tasks-extension.md). The upstream is the conformance fixture.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { CALLER_META_KEY } from '../../src/device/tools/contract.ts';
import { tsxCommand, useBridge, waitFor } from './connect.ts';

const UPSTREAM = fileURLToPath(new URL('../fixtures/conformance-server.ts', import.meta.url));
const EXT = 'io.modelcontextprotocol/tasks';
const meta = (credential: string, declares = true) => ({
  [CALLER_META_KEY]: { credential, scopes: ['devices:read', 'devices:act'] },
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': declares ? { extensions: { [EXT]: {} } } : {},
});

const bridge = useBridge(tsxCommand(UPSTREAM));

const rq = (method: string, params: Record<string, unknown>, credential = 'key-a', declares = true) =>
  bridge.client.request(
    { method, params: { ...params, _meta: meta(credential, declares) } },
    ResultSchema,
  ) as Promise<any>;

describe('bridge: the upstream’s tasks extension', () => {
  it('advertises the extension it proxies', () => {
    expect(bridge.client.getServerCapabilities()?.extensions).toEqual({ [EXT]: {} });
  });

  it('passes a task through unchanged and keeps it to its creator', async () => {
    const created = await rq('tools/call', { name: 'slow_compute', arguments: { seconds: 0.3, label: 'b' } });
    expect(created).toMatchObject({ resultType: 'task', status: 'working', ttlMs: expect.any(Number) });
    expect(created).not.toHaveProperty('content'); // not turned into a CallToolResult
    const taskId = created.taskId as string;
    await waitFor(async () => (await rq('tasks/get', { taskId })).status === 'completed', 10_000);
    const done = await rq('tasks/get', { taskId });
    expect(done.result.content[0].text).toContain('Computed b');
    for (const m of ['tasks/get', 'tasks/update', 'tasks/cancel'])
      await expect(rq(m, { taskId, inputResponses: {} }, 'key-b'), m).rejects.toMatchObject({ code: -32602 });
    expect(await rq('tasks/cancel', { taskId })).toEqual({ resultType: 'complete' });
  });

  it('delivers input through tasks/update', async () => {
    const created = await rq('tools/call', { name: 'confirm_delete', arguments: { filename: 'x' } });
    const taskId = created.taskId as string;
    await waitFor(async () => (await rq('tasks/get', { taskId })).status === 'input_required', 10_000);
    const { inputRequests } = await rq('tasks/get', { taskId });
    const [key] = Object.keys(inputRequests);
    expect(inputRequests[key].method).toBe('elicitation/create');
    await rq('tasks/update', { taskId, inputResponses: { [key]: { action: 'accept', content: { confirm: true } } } });
    await waitFor(async () => (await rq('tasks/get', { taskId })).status === 'completed', 10_000);
    expect((await rq('tasks/get', { taskId })).result.content[0].text).toBe('Deleted x');
  });

  it('answers a request without the extension as the upstream does: -32021 for a tool that needs a task', async () => {
    await expect(rq('tools/call', { name: 'failing_job', arguments: {} }, 'key-a', false)).rejects.toMatchObject({
      code: -32021,
    });
    const plain = await rq('tools/call', { name: 'slow_compute', arguments: { seconds: 0 } }, 'key-a', false);
    expect(plain.taskId).toBeUndefined();
    expect(plain.content[0].text).toContain('Computed');
  });
});
