import type { LoggingMessageNotification, Progress } from '@modelcontextprotocol/sdk/types.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { SimPhone } from '../sim/model.ts';
import type { Caller } from './contract.ts';
import { callerOf, connect, err, ok } from './in-memory.ts';

const scopes: Caller['scopes'] = ['devices:read', 'devices:act', 'devices:lease', 'runs:start'];
const ALICE: Caller = { credential: 'tok-alice', scopes };
const BOB: Caller = { credential: 'tok-bob', scopes };

async function setup(runStepDelayMs = 5) {
  const phone = new SimPhone({ now: () => 1_000 });
  const opts = { phone, deviceId: 'phone-1', now: () => 2_000, runStepDelayMs };
  const [a, b] = [await connect(opts), await connect(opts)];
  return { phone, aliceClient: a, alice: callerOf(a, ALICE), bob: callerOf(b, BOB) };
}

const until = async (check: () => boolean | Promise<boolean>) => {
  for (let i = 0; i < 500 && !(await check()); i++) await new Promise((r) => setTimeout(r, 10));
};

describe('runs', () => {
  it('executes the plan with progress notifications and log messages', async () => {
    const { phone, aliceClient, alice } = await setup();
    const progress: Progress[] = [];
    const logs: LoggingMessageNotification['params'][] = [];
    aliceClient.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    const result = ok(
      await alice(
        'start_run',
        {
          goal: 'write a note',
          steps: [
            { action: 'open_app', packageName: 'com.phonebridge.notes' },
            { action: 'tap', elementId: 'notes.body' },
            { action: 'type_text', text: 'milk' },
            { action: 'press_key', key: 'BACK' },
          ],
        },
        { onprogress: (p) => progress.push(p) },
      ),
    );
    expect(result).toEqual({
      runId: 'run-1',
      deviceId: 'phone-1',
      status: 'completed',
      goal: 'write a note',
      stepsTotal: 4,
      stepsDone: 4,
      startedAt: 2_000,
      endedAt: 2_000,
      failure: null,
    });
    expect(phone.snapshot()).toMatchObject({ screen: 'home', note: 'milk' });
    expect(progress.map((p) => [p.progress, p.total])).toEqual([
      [0, 4],
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
    expect(progress[0].message).toBe('run run-1 started: write a note');
    expect(progress[3].message).toBe('step 3/4 type_text: typed 4 characters into notes.body');
    expect(logs.map((l) => (l.data as { event: string }).event)).toEqual([
      'started',
      'step',
      'step',
      'step',
      'step',
      'ended',
    ]);
    expect(logs.every((l) => l.logger === 'phonebridge.run' && l.level === 'info')).toBe(true);
  });

  it("blocks other callers' act tools while running, and can be stopped", async () => {
    const { phone, alice, bob } = await setup();
    const running = alice('start_run', {
      steps: [
        { action: 'open_app', packageName: 'com.android.settings' },
        { action: 'wait', ms: 60_000 },
        { action: 'press_key', key: 'HOME' },
      ],
    });
    await until(() => phone.screen === 'settings');
    expect(err(await bob('press_key', { key: 'HOME' }))).toMatchObject({ code: 'device_busy', runId: 'run-1' });
    expect(err(await bob('take_device'))).toMatchObject({ code: 'device_busy' });
    expect(err(await bob('start_run', { steps: [{ action: 'wait', ms: 1 }] }))).toMatchObject({ code: 'device_busy' });
    expect(ok(await bob('observe_screen')).screen).toBe('settings'); // watching is allowed
    expect(ok(await bob('get_run', {}))).toMatchObject({ runId: 'run-1', status: 'running', stepsDone: 1 });
    expect(ok(await bob('list_devices')).devices[0].run).toEqual({ runId: 'run-1', status: 'running' });

    expect(ok(await bob('stop_run', {}))).toMatchObject({ status: 'stopped', stepsDone: 1, endedAt: 2_000 });
    expect(ok(await running)).toMatchObject({ runId: 'run-1', status: 'stopped', stepsDone: 1 });
    expect(phone.screen).toBe('settings'); // the step after the stop never ran
    expect(ok(await bob('press_key', { key: 'HOME' })).screen).toBe('home');
    expect(err(await bob('stop_run', {}))).toMatchObject({ code: 'run_not_found' });
  });

  it('answers at once with wait: false and is watched with get_run', async () => {
    const { alice } = await setup();
    const started = ok(
      await alice('start_run', {
        steps: [
          { action: 'press_key', key: 'HOME' },
          { action: 'wait', ms: 20 },
        ],
        wait: false,
      }),
    );
    expect(started).toMatchObject({ runId: 'run-1', status: 'running', stepsDone: 0 });
    await until(async () => ok(await alice('get_run', { runId: 'run-1' })).status !== 'running');
    expect(ok(await alice('get_run', { runId: 'run-1' }))).toMatchObject({ status: 'completed', stepsDone: 2 });
    expect(err(await alice('get_run', { runId: 'run-9' })).code).toBe('run_not_found');
  });

  it('fails on a refused step and frees the device', async () => {
    const { alice, bob } = await setup();
    const failed = ok(
      await alice('start_run', {
        steps: [
          { action: 'press_key', key: 'HOME' },
          { action: 'tap', elementId: 'no.such' },
          { action: 'press_key', key: 'HOME' },
        ],
      }),
    );
    expect(failed).toMatchObject({
      status: 'failed',
      stepsDone: 1,
      failure: { code: 'element_not_found', message: 'step 2 (tap): no element no.such on screen home' },
    });
    expect(ok(await bob('take_device')).leaseId).toBe('lease-1');
  });

  it('cancelling a waiting start_run stops the run', async () => {
    const { phone, alice } = await setup();
    const controller = new AbortController();
    const running = alice(
      'start_run',
      {
        steps: [
          { action: 'wait', ms: 60_000 },
          { action: 'open_app', packageName: 'com.android.settings' },
        ],
      },
      { signal: controller.signal },
    );
    await until(async () => ok(await alice('list_devices')).devices[0].run !== null);
    controller.abort();
    await expect(running).rejects.toThrow();
    await until(async () => ok(await alice('get_run', {})).status !== 'running');
    expect(ok(await alice('get_run', {}))).toMatchObject({ status: 'stopped', failure: { code: 'cancelled' } });
    expect(phone.screen).toBe('home');
  });

  it('a run on a device leased by someone else is refused', async () => {
    const { alice, bob } = await setup();
    ok(await alice('take_device'));
    expect(err(await bob('start_run', { steps: [{ action: 'wait', ms: 1 }] })).code).toBe('lease_required');
    expect(ok(await alice('start_run', { steps: [{ action: 'wait', ms: 1 }], leaseId: 'lease-1' })).status).toBe(
      'completed',
    );
  });
});
