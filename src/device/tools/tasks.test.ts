// Tasks on the phone's own surface (docs/decisions/0182-tasks.md), over the official SDK client
// in memory: a task-augmented start_run and wait_for_events, polling, results, cancellation,
// per-credential isolation, and the relay's credential_revoked notification.
import { describe, expect, it } from 'vitest';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { SimPhone } from '../sim/model.ts';
import { CALLER_META_KEY, type Caller } from './contract.ts';
import { connect } from './in-memory.ts';
import { CREDENTIAL_REVOKED_METHOD as CREDENTIAL_REVOKED } from './revocation.ts';
import { tasksFor } from './tasks.ts';

const ALICE: Caller = {
  credential: 'key-alice',
  scopes: ['devices:read', 'devices:act', 'devices:lease', 'runs:start'],
};
const BOB: Caller = { credential: 'key-bob', scopes: ['devices:read', 'devices:act', 'devices:lease', 'runs:start'] };
const as = (c: Caller) => ({ [CALLER_META_KEY]: c });

async function setup() {
  const phone = new SimPhone({ seed: 2 });
  const client = await connect({ phone, deviceId: 'p', runStepDelayMs: 150 });
  const rq = (method: string, params: Record<string, unknown>, caller = ALICE) =>
    client.request({ method, params: { ...params, _meta: as(caller) } }, ResultSchema) as Promise<any>;
  return { phone, client, rq };
}

const longRun = {
  goal: 'walk',
  steps: [
    { action: 'open_app', packageName: 'com.android.settings' },
    { action: 'wait', ms: 300 },
    { action: 'press_key', key: 'HOME' },
  ],
};

describe('tasks on the phone', () => {
  it('advertises tasks and marks start_run and wait_for_events as optional task tools', async () => {
    const { client } = await setup();
    expect(client.getServerCapabilities()?.tasks).toMatchObject({
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });
    const { tools } = await client.listTools();
    const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
    expect(support.start_run).toBe('optional');
    expect(support.wait_for_events).toBe('optional');
    expect(support.tap).toBe('forbidden');
    await client.close();
  });

  it('runs start_run as a task: created working, polled, its result delivered with the related-task meta', async () => {
    const { rq, client } = await setup();
    const created = await rq('tools/call', { name: 'start_run', arguments: longRun, task: { ttl: 60_000 } });
    expect(created.task).toMatchObject({ status: 'working', ttl: 60_000 });
    const id = created.task.taskId as string;
    expect((await rq('tasks/get', { taskId: id })).status).toBe('working');
    const result = await rq('tasks/result', { taskId: id });
    expect(result.structuredContent).toMatchObject({ status: 'completed', stepsDone: 3 });
    expect(result._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId: id });
    expect((await rq('tasks/get', { taskId: id })).status).toBe('completed');
    // The plain call still works for clients without tasks.
    const plain = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 0 } });
    expect(plain.structuredContent).toMatchObject({ timedOut: true });
    await client.close();
  });

  it('a tool error makes the task failed; a tool without task support refuses a task', async () => {
    const { rq, client } = await setup();
    const bad = await rq('tools/call', {
      name: 'start_run',
      arguments: { steps: [{ action: 'wait', ms: 1 }], leaseId: 'stale' },
      task: {},
    });
    const result = await rq('tasks/result', { taskId: bad.task.taskId });
    expect(result.isError).toBe(true);
    expect(JSON.parse(result.content[0].text).error.code).toBe('lease_mismatch');
    expect((await rq('tasks/get', { taskId: bad.task.taskId })).status).toBe('failed');
    await expect(rq('tools/call', { name: 'tap', arguments: { x: 1, y: 1 }, task: {} })).rejects.toMatchObject({
      code: -32601,
    });
    await client.close();
  });

  it('shows a credential only its own tasks: another gets not found and an empty list', async () => {
    const { rq, client } = await setup();
    const mine = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 30 }, task: {} });
    const id = mine.task.taskId as string;
    expect((await rq('tasks/list', {})).tasks.map((t: { taskId: string }) => t.taskId)).toEqual([id]);
    expect((await rq('tasks/list', {}, BOB)).tasks).toEqual([]);
    await expect(rq('tasks/get', { taskId: id }, BOB)).rejects.toMatchObject({ code: -32602 });
    await expect(rq('tasks/cancel', { taskId: id }, BOB)).rejects.toMatchObject({ code: -32602 });
    await expect(rq('tasks/result', { taskId: id }, BOB)).rejects.toMatchObject({ code: -32602 });
    expect((await rq('tasks/cancel', { taskId: id })).status).toBe('cancelled');
    // Cancelling a finished task is an error, and changes nothing.
    await expect(rq('tasks/cancel', { taskId: id })).rejects.toMatchObject({ code: -32602 });
    expect((await rq('tasks/get', { taskId: id })).status).toBe('cancelled');
    // A missing or non-string id says so, not "no task undefined".
    for (const params of [{}, { taskId: 5 }])
      await expect(rq('tasks/get', params)).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining('params.taskId must be a string'),
      });
    await client.close();
  });

  it('refuses a tasks/list cursor it never gave out with -32602 instead of listing from the start', async () => {
    const { rq, client } = await setup();
    await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 30 }, task: {} });
    for (const cursor of ['garbage', 5, '-1', ''])
      await expect(rq('tasks/list', { cursor })).rejects.toMatchObject({
        code: -32602,
        message: expect.stringMatching(/cursor/),
      });
    expect((await rq('tasks/list', {})).tasks).toHaveLength(1);
    await client.close();
  });

  it('cancel stops the run at the phone', async () => {
    const { rq, client, phone } = await setup();
    const created = await rq('tools/call', {
      name: 'start_run',
      arguments: {
        steps: [
          { action: 'wait', ms: 5_000 },
          { action: 'open_app', packageName: 'com.android.settings' },
        ],
      },
      task: {},
    });
    await rq('tasks/cancel', { taskId: created.task.taskId });
    const run = await rq('tools/call', { name: 'get_run', arguments: {} });
    await expect
      .poll(async () => (await rq('tools/call', { name: 'get_run', arguments: {} })).structuredContent.status)
      .toBe('stopped');
    expect(run.structuredContent.stepsDone).toBe(0);
    expect(phone.foregroundApp).not.toBe('com.android.settings');
    await client.close();
  });

  it('credential_revoked cancels that credential’s tasks, and only those', async () => {
    const { rq, client, phone } = await setup();
    const a = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 60 }, task: {} });
    const b = await rq('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 60 }, task: {} }, BOB);
    await client.notification({ method: CREDENTIAL_REVOKED, params: { credential: ALICE.credential } });
    await expect.poll(async () => (await rq('tasks/get', { taskId: a.task.taskId })).status).toBe('cancelled');
    expect((await rq('tasks/get', { taskId: b.task.taskId }, BOB)).status).toBe('working');
    expect(tasksFor(phone).cancelCredential(BOB.credential)).toBe(1);
    await client.close();
  });
});
