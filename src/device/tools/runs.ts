// Actions on the phone, shared by the act tools and by runs, and the run executor itself.
import type { ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import { SimError, type ActEffect, type SimPhone } from '../sim/model.ts';
import type { Run, RunStatus } from './control.ts';
import type { RunStep } from './schemas.ts';

/** Performs one action step on the phone; throws SimError when the phone refuses it. */
export function performStep(phone: SimPhone, step: Exclude<RunStep, { action: 'wait' }>): ActEffect {
  switch (step.action) {
    case 'tap':
      return phone.tap(step.elementId !== undefined ? { elementId: step.elementId } : { x: step.x!, y: step.y! });
    case 'hold':
      return phone.hold(step.elementId !== undefined ? { elementId: step.elementId } : { x: step.x!, y: step.y! });
    case 'swipe':
      return step.elementId !== undefined
        ? phone.swipeElement(step.elementId, step.direction!)
        : phone.swipe({ x: step.startX!, y: step.startY! }, { x: step.endX!, y: step.endY! });
    case 'type_text':
      return phone.typeText(step.text, step.elementId);
    case 'press_key':
      return phone.pressKey(step.key);
    case 'open_app':
      return phone.openApp(step.packageName);
  }
}

export function runInfo(run: Run, deviceId: string) {
  return {
    runId: run.id,
    deviceId,
    status: run.status,
    goal: run.goal,
    stepsTotal: run.steps.length,
    stepsDone: run.stepsDone,
    startedAt: run.startedAt,
    endedAt: run.endedAt,
    failure: run.failure,
  };
}

export function endRun(
  run: Run,
  status: Exclude<RunStatus, 'running'>,
  now: number,
  failure: Run['failure'] = null,
): void {
  if (run.status !== 'running') return;
  run.status = status;
  run.endedAt = now;
  run.failure = failure;
  run.stopper.abort();
}

export interface RunReporter {
  /** null when the caller is not listening (no progressToken, or it did not wait). */
  progressToken: string | number | null;
  send(notification: ServerNotification): Promise<void>;
}

/**
 * Executes a run's steps in order, pausing `stepDelayMs` before each (a real phone needs time
 * to settle). Stops between steps once the run is no longer running; never throws for a
 * refused step, which fails the run instead.
 */
export async function executeRun(
  run: Run,
  phone: SimPhone,
  opts: { stepDelayMs: number; now: () => number; reporter: RunReporter },
): Promise<void> {
  const { reporter } = opts;
  const report = (notification: ServerNotification) => reporter.send(notification).catch(() => undefined);
  const progress = (message: string) =>
    reporter.progressToken === null
      ? undefined
      : report({
          method: 'notifications/progress',
          params: { progressToken: reporter.progressToken, progress: run.stepsDone, total: run.steps.length, message },
        });
  const log = (data: Record<string, unknown>) =>
    report({
      method: 'notifications/message',
      params: { level: 'info', logger: 'phonebridge.run', data: { runId: run.id, ...data } },
    });

  await progress(`run ${run.id} started${run.goal ? `: ${run.goal}` : ''}`);
  await log({ event: 'started', goal: run.goal, steps: run.steps.length });
  for (const [index, step] of (run.steps as RunStep[]).entries()) {
    await sleep(step.action === 'wait' ? step.ms : opts.stepDelayMs, run.stopper.signal);
    if (run.status !== 'running') break;
    let effect: string;
    try {
      effect = step.action === 'wait' ? `waited ${step.ms} ms` : performStep(phone, step).effect;
    } catch (error) {
      if (!(error instanceof SimError)) throw error;
      endRun(run, 'failed', opts.now(), {
        code: error.code,
        message: `step ${index + 1} (${step.action}): ${error.message}`,
      });
      break;
    }
    run.stepsDone = index + 1;
    await log({ event: 'step', step: index + 1, action: step.action, effect });
    await progress(`step ${index + 1}/${run.steps.length} ${step.action}: ${effect}`);
  }
  endRun(run, 'completed', opts.now());
  await log({
    event: 'ended',
    status: run.status,
    stepsDone: run.stepsDone,
    ...(run.failure ? { failure: run.failure } : {}),
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted || ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
