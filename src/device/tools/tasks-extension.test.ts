// The 2026-07-28 tasks extension (SEP-2663) on the phone's own surface
// (docs/decisions/0183-tasks-extension.md), over the official SDK client in memory with requests
// as the relay forwards them from a 2026-07-28 client: the revision and the client's
// capabilities in _meta, the caller context beside them.
import { describe, expect, it } from 'vitest';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { SimPhone } from '../sim/model.ts';
import { CALLER_META_KEY, type Caller } from './contract.ts';
import { connect } from './in-memory.ts';
import { CREDENTIAL_REVOKED_METHOD as CREDENTIAL_REVOKED } from './revocation.ts';
import { extensionView } from './task-server.ts';

const ALL = ['devices:read', 'devices:act', 'devices:lease', 'runs:start'] as const;
const ALICE: Caller = { credential: 'key-alice', scopes: [...ALL] };
const BOB: Caller = { credential: 'key-bob', scopes: [...ALL] };
const EXT = 'io.modelcontextprotocol/tasks';
const modern = (caller: Caller, declares: boolean) => ({
  [CALLER_META_KEY]: caller,
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': declares ? { extensions: { [EXT]: {} } } : {},
});

async function setup() {
  const phone = new SimPhone({ seed: 4 });
  const client = await connect({ phone, deviceId: 'p', runStepDelayMs: 100 });
  /** A 2026-07-28 request; `declares`: the client declared the extension on it. */
  const rq = (method: string, params: Record<string, unknown>, caller = ALICE, declares = true) =>
    client.request({ method, params: { ...params, _meta: modern(caller, declares) } }, ResultSchema) as Promise<any>;
  return { phone, client, rq };
}

const run = (ms: number) => ({
  goal: 'walk',
  steps: [
    { action: 'open_app', packageName: 'com.android.settings' },
    { action: 'wait', ms },
    { action: 'press_key', key: 'HOME' },
  ],
});

describe('the tasks extension on the phone', () => {
  it('advertises the extension beside the 2025-11-25 tasks', async () => {
    const { client } = await setup();
    expect(client.getServerCapabilities()?.extensions).toEqual({ [EXT]: {} });
    expect(client.getServerCapabilities()?.tasks).toBeDefined();
    await client.close();
  });

  it('answers a declaring client’s start_run with a flat task, polled to its inlined result', async () => {
    const { rq, client } = await setup();
    const created = await rq('tools/call', { name: 'start_run', arguments: run(600) });
    expect(created).toMatchObject({ resultType: 'task', status: 'working', ttlMs: 3_600_000, pollIntervalMs: 1_000 });
    for (const k of ['task', 'ttl', 'pollInterval', 'result', 'error', 'requestState'])
      expect(created).not.toHaveProperty(k);
    expect(created.createdAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    const id = created.taskId as string;
    // Durable on creation: an immediate tasks/get finds it.
    expect(await rq('tasks/get', { taskId: id })).toMatchObject({
      resultType: 'complete',
      taskId: id,
      status: 'working',
    });
    await expect
      .poll(async () => (await rq('tasks/get', { taskId: id })).status, { timeout: 10_000 })
      .toBe('completed');
    const done = await rq('tasks/get', { taskId: id });
    expect(done.result.structuredContent).toMatchObject({ status: 'completed', stepsDone: 3 });
    expect(done.result._meta?.['io.modelcontextprotocol/related-task']).toBeUndefined();
    await client.close();
  });

  it('gives a quick call its plain result, and a client that did not declare the extension always', async () => {
    const { rq, client } = await setup();
    const quick = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 0 } });
    expect(quick.resultType).toBeUndefined();
    expect(quick.structuredContent).toMatchObject({ timedOut: true });
    const undeclared = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 1 } }, ALICE, false);
    expect(undeclared.taskId).toBeUndefined();
    expect(undeclared.structuredContent).toMatchObject({ timedOut: true });
    // The legacy `task` member is ignored on this revision: no 2025-11-25 task for it.
    const legacy = await rq('tools/call', { name: 'tap', arguments: { x: 1, y: 1 }, task: { ttl: 1000 } });
    expect(legacy.task).toBeUndefined();
    expect(legacy.content).toBeDefined();
    await client.close();
  });

  it('reports a tool error as completed with isError, not failed; a thrown one as failed with an error', () => {
    const info = {
      taskId: 't',
      status: 'failed' as const,
      statusMessage: 'x',
      createdAt: 'a',
      lastUpdatedAt: 'b',
      ttl: 5,
      pollInterval: 1,
    };
    const toolError = { content: [{ type: 'text', text: '{"error":{}}' }], isError: true };
    expect(extensionView(info, { result: toolError })).toEqual({
      taskId: 't',
      status: 'completed',
      createdAt: 'a',
      lastUpdatedAt: 'b',
      ttlMs: 5,
      pollIntervalMs: 1,
      result: toolError,
    });
    expect(extensionView(info, { error: 'boom' })).toMatchObject({
      status: 'failed',
      statusMessage: 'x',
      error: { code: -32603, message: 'boom' },
    });
    expect(extensionView(info, { error: 'boom' })).not.toHaveProperty('result');
  });

  it('answers a call that fails at once with its plain error result', async () => {
    const { rq, client } = await setup();
    const bad = await rq('tools/call', {
      name: 'start_run',
      arguments: { steps: [{ action: 'wait', ms: 1 }], leaseId: 'stale' },
    });
    // It ended at once: the plain error result, as for a call without tasks.
    expect(bad.isError).toBe(true);
    const slowBad = await rq('tools/call', {
      name: 'wait_for_events',
      arguments: { timeout_s: 1, leaseId: 'stale' },
    });
    expect(slowBad.isError).toBe(true);
    await client.close();
  });

  it('cancel is an ack that stops the run at the phone, also for a finished task; tasks/update is an ack', async () => {
    const { rq, client, phone } = await setup();
    const created = await rq('tools/call', {
      name: 'start_run',
      arguments: {
        steps: [
          { action: 'wait', ms: 5_000 },
          { action: 'open_app', packageName: 'com.android.settings' },
        ],
      },
    });
    const id = created.taskId as string;
    expect(await rq('tasks/update', { taskId: id, inputResponses: { nothing: {} } })).toEqual({
      resultType: 'complete',
    });
    expect(await rq('tasks/cancel', { taskId: id })).toEqual({ resultType: 'complete' });
    expect((await rq('tasks/get', { taskId: id })).status).toBe('cancelled');
    await expect
      .poll(async () => (await rq('tools/call', { name: 'get_run', arguments: {} })).structuredContent.status)
      .toBe('stopped');
    expect(phone.foregroundApp).not.toBe('com.android.settings');
    expect(await rq('tasks/cancel', { taskId: id })).toEqual({ resultType: 'complete' });
    expect((await rq('tasks/get', { taskId: id })).status).toBe('cancelled');
    await client.close();
  });

  it('keeps tasks to their credential, refuses undeclared clients, and has no tasks/result or tasks/list', async () => {
    const { rq, client } = await setup();
    const created = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 30 } });
    const id = created.taskId as string;
    for (const m of ['tasks/get', 'tasks/update', 'tasks/cancel'])
      await expect(rq(m, { taskId: id, inputResponses: {} }, BOB), m).rejects.toMatchObject({ code: -32602 });
    await expect(rq('tasks/get', { taskId: 'no-such-task' })).rejects.toMatchObject({ code: -32602 });
    for (const m of ['tasks/get', 'tasks/update', 'tasks/cancel'])
      await expect(rq(m, { taskId: id, inputResponses: {} }, ALICE, false), m).rejects.toMatchObject({
        code: -32021,
        data: { requiredCapabilities: { extensions: { [EXT]: {} } } },
      });
    for (const m of ['tasks/result', 'tasks/list'])
      await expect(rq(m, { taskId: id }), m).rejects.toMatchObject({ code: -32601 });
    // A revoked credential's extension tasks are cancelled like the others.
    await client.notification({ method: CREDENTIAL_REVOKED, params: { credential: ALICE.credential } });
    await expect.poll(async () => (await rq('tasks/get', { taskId: id })).status).toBe('cancelled');
    await client.close();
  });
});
