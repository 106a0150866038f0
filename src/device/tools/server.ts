// The phone's MCP tool surface (published as docs/TOOLS.md): four groups, one scope each, typed results,
// explicit annotations, strict inputs, leases, idempotency keys and runs.
import { Buffer } from 'node:buffer';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type {
  CallToolResult,
  ContentBlock,
  ServerNotification,
  ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type * as z from 'zod';
import { SimError, type ActEffect, type EventType, type PhoneEvent, type SimPhone } from '../sim/model.ts';
import { takeScreenshot } from '../sim/screenshot.ts';
import {
  RESULT_LIMIT_BYTES,
  REPLAYED_META_KEY,
  SCOPE_META_KEY,
  LAUNCH_VERSION,
  SURFACE_VERSION,
  TIMEOUT_MS_SINCE,
  ToolError,
  callerFrom,
  envelopeForSdkError,
  errorResult,
  isEnvelope,
  successResult,
  type Caller,
  type Scope,
} from './contract.ts';
import { controlFor, type Access, type PhoneControl } from './control.ts';
import { handleCredentialRevoked } from './revocation.ts';
import { endRun, executeRun, performStep, runInfo } from './runs.ts';
import { portableSchema } from './portable.ts';
import { serveTasks, TASKS_CAPABILITY, TASKS_EXTENSION_CAPABILITY } from './task-server.ts';
import { tasksFor } from './tasks.ts';
import * as s from './schemas.ts';

export interface PhoneServerOptions {
  phone: SimPhone;
  deviceId: string;
  serverName?: string;
  /** Clock for leases, outcomes and timestamps (ms since the epoch); inject one in tests. */
  now?: () => number;
  /** A lease lasts this long after its last use. Default 5 minutes. */
  leaseTtlMs?: number;
  /** Recorded outcomes are replayable this long. Default 24 hours. */
  idempotencyTtlMs?: number;
  /** At most this many recorded outcomes per phone; the least recently used go first. Default 1000. */
  idempotencyMaxEntries?: number;
  /** Pause before each run step. Default 250 ms. */
  runStepDelayMs?: number;
}

type Hints = { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: false };
const OBSERVES: Hints = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
// Gestures do what a finger does: not destructive; idempotent through idempotency keys.
const ACTS: Hints = { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false };
// The two run tools hand the device to (or take it from) an autonomous loop.
const RUNS: Hints = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };

interface ToolSpec<I extends z.ZodType = z.ZodType, O extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  scope: Scope;
  since: string;
  description: string;
  annotations: Hints;
  requiresUserInteraction: boolean;
  input: I;
  output: O;
  run(args: z.output<I>, ctx: CallContext): z.output<O> | Promise<z.output<O>>;
}

const tool = <I extends z.ZodType, O extends z.ZodObject>(spec: ToolSpec<I, O>) => spec as unknown as ToolSpec;

const MAX_EVENTS_PER_RESULT = 100;
/** wait_for_events' result around its events: cursor, flags and both envelopes. */
const EVENTS_ENVELOPE_BYTES = 512;
/** What an image block and the screenshot's description add to a result, besides the base64. */
const SCREENSHOT_ENVELOPE_BYTES = 1024;

/** Everything a tool call may use: the caller, the phone, and its shared control state. */
class CallContext {
  readonly attachments: ContentBlock[] = [];
  readonly resultMeta: Record<string, unknown> = {};

  constructor(
    readonly caller: Caller,
    readonly opts: Required<Omit<PhoneServerOptions, 'serverName'>>,
    readonly control: PhoneControl,
    readonly extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  ) {}

  get phone() {
    return this.opts.phone;
  }
  get deviceId() {
    return this.opts.deviceId;
  }
  now() {
    return this.opts.now();
  }

  authorize(leaseId: string | undefined, access: Access): string | null {
    return this.control.authorize(this.caller, leaseId, access, this.now(), this.opts.leaseTtlMs);
  }

  /** The outcome recorded under this call's idempotency key, marked as a replay; else undefined. */
  replay(toolName: string, args: { idempotencyKey?: string }): Record<string, unknown> | undefined {
    if (args.idempotencyKey === undefined) return undefined;
    const prior = this.control.recall(
      this.caller.credential,
      args.idempotencyKey,
      this.now(),
      this.opts.idempotencyTtlMs,
    );
    if (!prior) return undefined;
    if (prior.tool !== toolName || prior.fingerprint !== fingerprint(args)) {
      throw new ToolError(
        'idempotency_key_reused',
        `idempotency key ${args.idempotencyKey} was used for a different ${prior.tool} call; use a new key`,
      );
    }
    this.resultMeta[REPLAYED_META_KEY] = true;
    return prior.read();
  }

  remember(toolName: string, args: { idempotencyKey?: string }, read: () => Record<string, unknown>): void {
    if (args.idempotencyKey === undefined) return;
    this.control.record(
      this.caller.credential,
      args.idempotencyKey,
      { tool: toolName, fingerprint: fingerprint(args), recordedAt: this.now(), read },
      this.opts.idempotencyMaxEntries,
    );
  }
}

/** What identifies "the same call" for an idempotency key: the arguments that change the action. */
function fingerprint(args: Record<string, unknown>): string {
  const { leaseId: _lease, idempotencyKey: _key, ...rest } = args;
  return JSON.stringify(rest);
}

// ---- Read: devices:read ----------------------------------------------------------

const listDevices = tool({
  name: 'list_devices',
  title: 'List devices',
  scope: 'devices:read',
  since: LAUNCH_VERSION,
  description:
    'Lists the device(s) this connection reaches, with screen size, foreground app, installed apps, and who holds the lease or a run.',
  annotations: OBSERVES,
  requiresUserInteraction: false,
  input: s.listDevicesInput,
  output: s.listDevicesOutput,
  run(_args, ctx) {
    const lease = ctx.control.currentLease(ctx.now());
    const mine = lease?.holder === ctx.caller.credential;
    const run = ctx.control.activeRun;
    return {
      devices: [
        {
          deviceId: ctx.deviceId,
          model: 'phonebridge-sim',
          screen: { width: ctx.phone.width, height: ctx.phone.height },
          foregroundApp: ctx.phone.foregroundApp,
          installedApps: ctx.phone.installedApps,
          lease: {
            state: !lease ? ('free' as const) : mine ? ('yours' as const) : ('others' as const),
            leaseId: mine ? lease.id : null,
            expiresAt: lease?.expiresAt ?? null,
          },
          run: run ? { runId: run.id, status: 'running' as const } : null,
        },
      ],
    };
  },
});

const observeScreen = tool({
  name: 'observe_screen',
  title: 'Observe the screen',
  scope: 'devices:read',
  since: LAUNCH_VERSION,
  description:
    'Returns the screen as an element tree (id, role, text, bounds in screen pixels, enabled, focused, checked, parentId) and, if asked, a PNG screenshot as an image block. The screenshot always fits one message; a size beyond the maximum is refused with too_large.',
  annotations: OBSERVES,
  requiresUserInteraction: false,
  input: s.observeScreenInput,
  output: s.observeScreenOutput,
  run(args, ctx) {
    const leaseId = ctx.authorize(args.leaseId, 'observe');
    const { phone } = ctx;
    const value = {
      deviceId: ctx.deviceId,
      app: phone.foregroundApp,
      screen: phone.screen,
      title: phone.title,
      width: phone.width,
      height: phone.height,
      focusedElementId: phone.focusedElementId,
      elements: phone.elements(),
      cursor: phone.cursor,
      leaseId,
      screenshot: null as null | { mimeType: 'image/png'; width: number; height: number; bytes: number },
    };
    if (args.screenshot?.include) {
      // The tree goes out twice, as structuredContent and as the text block's string: a
      // default-size screenshot gets what is left of one message (takeScreenshot;
      // docs/decisions/0219-default-screenshot-fits.md).
      const json = JSON.stringify(value);
      const tree = Buffer.byteLength(json) + Buffer.byteLength(JSON.stringify(json));
      const room = RESULT_LIMIT_BYTES - tree - SCREENSHOT_ENVELOPE_BYTES;
      if (room <= 0)
        throw new ToolError('too_large', 'the element tree leaves no room for a screenshot in one message');
      const shot = takeScreenshot(phone, { width: args.screenshot.width, scale: args.screenshot.scale }, room);
      ctx.attachments.push({ type: 'image', data: shot.base64, mimeType: shot.mimeType });
      value.screenshot = { mimeType: shot.mimeType, width: shot.width, height: shot.height, bytes: shot.bytes };
    }
    return value;
  },
});

const getOutcome = tool({
  name: 'get_outcome',
  title: 'Look up an outcome',
  scope: 'devices:read',
  since: LAUNCH_VERSION,
  description:
    'Looks up the outcome recorded under one of your idempotency keys (act tools and start_run record one), without acting.',
  annotations: OBSERVES,
  requiresUserInteraction: false,
  input: s.getOutcomeInput,
  output: s.getOutcomeOutput,
  run({ idempotencyKey }, ctx) {
    const outcome = ctx.control.recall(ctx.caller.credential, idempotencyKey, ctx.now(), ctx.opts.idempotencyTtlMs);
    return {
      idempotencyKey,
      found: !!outcome,
      tool: outcome?.tool ?? null,
      recordedAt: outcome?.recordedAt ?? null,
      // What act tools and start_run recorded (ctx.remember): their own results, by construction.
      result: (outcome?.read() as z.output<typeof s.getOutcomeOutput>['result'] | undefined) ?? null,
    };
  },
});

const waitForEvents = tool({
  name: 'wait_for_events',
  title: 'Wait for events',
  scope: 'devices:read',
  since: LAUNCH_VERSION,
  description:
    'Returns notifications, app changes and screen changes after `cursor`. If none are pending, waits until one arrives or the wait (`timeout_s`, or `timeout_ms`) passes, then returns an empty list. Pass the returned cursor back to continue.',
  annotations: OBSERVES,
  requiresUserInteraction: false,
  input: s.waitForEventsInput,
  output: s.waitForEventsOutput,
  async run(args, ctx) {
    ctx.authorize(args.leaseId, 'observe');
    // A cursor ahead of the phone's log comes from before the agent restarted (the log starts
    // over with the process): every event of this log is news to that caller.
    const cursor = args.cursor === undefined ? ctx.phone.cursor : args.cursor > ctx.phone.cursor ? 0 : args.cursor;
    const events = await nextEvents(ctx.phone, cursor, args.types, waitMs(args), ctx.extra.signal);
    const batch = firstBatch(events);
    const more = events.length > batch.length;
    return {
      events: batch,
      cursor: more ? batch[batch.length - 1].seq : Math.max(cursor, ctx.phone.cursor),
      timedOut: events.length === 0,
      more,
    };
  },
});

/**
 * The first events that fit one result: at most MAX_EVENTS_PER_RESULT, and within the message
 * limit, counting each event twice (structuredContent and the text block carry the same JSON,
 * the text block's escaped once more).
 * Always the first event: one event of the sim is far below the limit (its texts are capped),
 * so a cursor can never get stuck on `too_large`.
 */
function firstBatch(events: PhoneEvent[]): PhoneEvent[] {
  let bytes = EVENTS_ENVELOPE_BYTES;
  let n = 0;
  for (const e of events) {
    if (n === MAX_EVENTS_PER_RESULT) break;
    const json = JSON.stringify(e);
    // Once as structuredContent, once inside the text block's string (escaped again), and a comma each.
    bytes += Buffer.byteLength(json) + Buffer.byteLength(JSON.stringify(json)) - 2 + 2;
    if (n > 0 && bytes > RESULT_LIMIT_BYTES) break;
    n++;
  }
  return events.slice(0, n);
}

/** The wait a call asked for: timeout_s or timeout_ms, one of them at most; else the default. */
function waitMs(args: { timeout_s?: number; timeout_ms?: number }): number {
  if (args.timeout_s !== undefined && args.timeout_ms !== undefined)
    throw new ToolError('invalid_arguments', 'give timeout_s or timeout_ms, not both: they set the same wait');
  return args.timeout_ms ?? (args.timeout_s ?? s.WAIT_DEFAULT_S) * 1000;
}

/** Pending events, or the first ones to arrive within the timeout; empty on timeout or cancellation. */
function nextEvents(
  phone: SimPhone,
  cursor: number,
  types: EventType[] | undefined,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<PhoneEvent[]> {
  const pending = phone.eventsSince(cursor, types);
  if (pending.length > 0 || timeoutMs === 0 || signal.aborted) return Promise.resolve(pending);
  return new Promise((resolve) => {
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      unsubscribe();
      signal.removeEventListener('abort', finish);
      resolve(signal.aborted ? [] : phone.eventsSince(cursor, types));
    };
    // One action can emit several events at once (app_changed + screen_changed): answer after it.
    const unsubscribe = phone.onEvent((e) => {
      if (!types || types.includes(e.type)) queueMicrotask(finish);
    });
    const timer = setTimeout(finish, timeoutMs);
    signal.addEventListener('abort', finish, { once: true });
  });
}

// ---- Act: devices:act -------------------------------------------------------------

function actTool<I extends z.ZodType<{ leaseId?: string; idempotencyKey?: string }>>(
  name: s.Action,
  title: string,
  description: string,
  input: I,
) {
  return tool({
    name,
    title,
    scope: 'devices:act',
    since: LAUNCH_VERSION,
    description: `${description} Accepts leaseId and an idempotencyKey (a retry with the same key replays the outcome).`,
    annotations: ACTS,
    requiresUserInteraction: false,
    input,
    output: s.actOutput,
    run(args, ctx) {
      const prior = ctx.replay(name, args);
      if (prior) return prior as s.ActOutput;
      const wasFree = ctx.control.currentLease(ctx.now()) === null;
      const leaseId = ctx.authorize(args.leaseId, 'act');
      let effect: ActEffect;
      try {
        effect = performStep(ctx.phone, { ...args, action: name } as Parameters<typeof performStep>[1]);
      } catch (error) {
        // A refused act changes nothing: give back the lease authorize took for it on a free device.
        if (wasFree && leaseId !== null) ctx.control.release(ctx.caller, leaseId, ctx.now());
        throw error;
      }
      const outcome = actOutcome(ctx, name, effect, leaseId);
      ctx.remember(name, args, () => outcome);
      return outcome;
    },
  });
}

function actOutcome(ctx: CallContext, action: s.Action, effect: ActEffect, leaseId: string | null): s.ActOutput {
  const { phone } = ctx;
  return {
    deviceId: ctx.deviceId,
    action,
    effect: effect.effect,
    elementId: effect.elementId,
    x: effect.point?.x ?? null,
    y: effect.point?.y ?? null,
    app: phone.foregroundApp,
    screen: phone.screen,
    title: phone.title,
    cursor: phone.cursor,
    leaseId,
    performedAt: ctx.now(),
  };
}

const tap = actTool(
  'tap',
  'Tap',
  'Taps a point given in screen pixels (x, y) or the centre of an element (elementId).',
  s.tapInput,
);
const swipe = actTool(
  'swipe',
  'Swipe',
  'Swipes from (startX, startY) to (endX, endY) in screen pixels, or across an element in a direction. Swiping up on a list scrolls it; swiping down from the status bar opens the notifications.',
  s.swipeInput,
);
const hold = actTool(
  'hold',
  'Long press',
  'Presses and holds a point or element; on items that have one, this opens a context menu.',
  s.holdInput,
);
const typeText = actTool(
  'type_text',
  'Type text',
  `Types text into the focused text field, or into elementId after focusing it. A field holds at most 5000 UTF-16 units, as on Android (an emoji takes two); the rest is dropped and the effect says how many characters were typed (@since ${TIMEOUT_MS_SINCE}).`,
  s.typeTextInput,
);
const pressKey = actTool(
  'press_key',
  'Press a key',
  'Presses a key: BACK, HOME, ENTER (submit), DEL (delete one character), TAB (next field), SPACE or ESCAPE.',
  s.pressKeyInput,
);
const openApp = actTool(
  'open_app',
  'Open an app',
  'Opens an installed app by package name (list_devices lists them).',
  s.openAppInput,
);

// ---- Lease: devices:lease ----------------------------------------------------------

const takeDevice = tool({
  name: 'take_device',
  title: 'Take the device',
  scope: 'devices:lease',
  since: LAUNCH_VERSION,
  description:
    'Takes exclusive use of the device, or renews the lease you hold. The lease expires after a period without use; every call under it renews it. Refused with device_busy while someone else holds it or a run has it.',
  annotations: ACTS,
  requiresUserInteraction: false,
  input: s.takeDeviceInput,
  output: s.takeDeviceOutput,
  run(_args, ctx) {
    const lease = ctx.control.take(ctx.caller, ctx.now(), ctx.opts.leaseTtlMs);
    return {
      deviceId: ctx.deviceId,
      leaseId: lease.id,
      expiresAt: lease.expiresAt,
      ttlS: Math.round(ctx.opts.leaseTtlMs / 1000),
      renewed: lease.renewed,
    };
  },
});

const releaseDevice = tool({
  name: 'release_device',
  title: 'Release the device',
  scope: 'devices:lease',
  since: LAUNCH_VERSION,
  description: 'Returns the device. Requires the leaseId; a stale one is refused with lease_mismatch.',
  annotations: ACTS,
  requiresUserInteraction: false,
  input: s.releaseDeviceInput,
  output: s.releaseDeviceOutput,
  run({ leaseId }, ctx) {
    ctx.control.release(ctx.caller, leaseId, ctx.now());
    return { deviceId: ctx.deviceId, leaseId, released: true as const };
  },
});

// ---- Runs: runs:start ---------------------------------------------------------------

const startRun = tool({
  name: 'start_run',
  title: 'Start a run',
  scope: 'runs:start',
  since: LAUNCH_VERSION,
  description: `Hands the device to an autonomous run that executes a plan of steps (tap, hold, swipe, type_text, press_key, open_app, wait). While it runs, act tools of other callers are refused with device_busy. With wait (default) the call answers when the run ends and sends progress notifications (when the request has a progressToken) and log messages meanwhile; cancelling the call stops the run. Accepts an idempotencyKey: a retry with the same key returns that run's current state instead of starting another.`,
  annotations: RUNS,
  requiresUserInteraction: true,
  input: s.startRunInput,
  output: s.runInfo,
  async run(args, ctx) {
    const prior = ctx.replay('start_run', args);
    if (prior) return prior as z.output<typeof s.runInfo>;
    ctx.authorize(args.leaseId, 'run');
    const run = ctx.control.createRun(ctx.caller.credential, args.goal, args.steps, ctx.now());
    ctx.remember('start_run', args, () => runInfo(run, ctx.deviceId));
    const progressToken = args.wait ? (ctx.extra._meta?.progressToken ?? null) : null;
    const finished = executeRun(run, ctx.phone, {
      stepDelayMs: ctx.opts.runStepDelayMs,
      now: () => ctx.now(),
      reporter: { progressToken, send: (n) => (args.wait ? ctx.extra.sendNotification(n) : Promise.resolve()) },
    }).catch((error: unknown) => endRun(run, 'failed', ctx.now(), { code: 'internal_error', message: String(error) }));
    if (!args.wait) return runInfo(run, ctx.deviceId);
    const cancel = () =>
      endRun(run, 'stopped', ctx.now(), { code: 'cancelled', message: 'the start_run request was cancelled' });
    ctx.extra.signal.addEventListener('abort', cancel, { once: true });
    await finished;
    ctx.extra.signal.removeEventListener('abort', cancel);
    return runInfo(run, ctx.deviceId);
  },
});

const getRun = tool({
  name: 'get_run',
  title: 'Watch a run',
  scope: 'runs:start',
  since: LAUNCH_VERSION,
  description: "Returns a run's status and progress: by runId, else the active run, else the latest.",
  annotations: OBSERVES,
  requiresUserInteraction: false,
  input: s.getRunInput,
  output: s.runInfo,
  run({ runId }, ctx) {
    const run = ctx.control.findRun(runId);
    if (!run)
      throw new ToolError('run_not_found', runId ? `no run ${runId} on this device` : 'no run on this device yet');
    return runInfo(run, ctx.deviceId);
  },
});

const stopRun = tool({
  name: 'stop_run',
  title: 'Stop a run',
  scope: 'runs:start',
  since: LAUNCH_VERSION,
  description:
    'Stops a run (by runId, else the active one) after its current step and frees the device. Stopping an ended run changes nothing and returns it.',
  annotations: RUNS,
  requiresUserInteraction: true,
  input: s.stopRunInput,
  output: s.runInfo,
  run({ runId }, ctx) {
    const run = runId !== undefined ? ctx.control.findRun(runId) : ctx.control.activeRun;
    if (!run)
      throw new ToolError(
        'run_not_found',
        runId ? `no run ${runId} on this device` : 'no run is active on this device',
      );
    endRun(run, 'stopped', ctx.now());
    return runInfo(run, ctx.deviceId);
  },
});

/** The published surface, in the order tools/list shows it. */
const TOOLS: readonly ToolSpec[] = [
  listDevices,
  observeScreen,
  getOutcome,
  waitForEvents,
  tap,
  swipe,
  hold,
  typeText,
  pressKey,
  openApp,
  takeDevice,
  releaseDevice,
  startRun,
  getRun,
  stopRun,
];

/**
 * The tools a client may also call as a task (execution.taskSupport "optional", decision 0182):
 * the long ones. A plain call of them works as before.
 */
export const TASK_TOOLS: ReadonlySet<string> = new Set(['start_run', 'wait_for_events']);

/** Tool metadata for docs and for the relay's scope checks. */
export const TOOL_CATALOG = TOOLS.map(({ name, title, scope, since, annotations, requiresUserInteraction }) => ({
  name,
  title,
  scope,
  since,
  annotations,
  requiresUserInteraction,
}));
export const TOOL_SCOPES: Readonly<Record<string, Scope>> = Object.fromEntries(TOOLS.map((t) => [t.name, t.scope]));

const INSTRUCTIONS = `A phone (simulated). observe_screen shows the element tree; act with tap, swipe, hold, type_text, press_key and open_app using screen pixels or element ids. Take the device with take_device (or let the first act take it when your credential has devices:lease); every call under the lease renews it. Errors are {"error":{"code","message"}} in the text block.`;

export function createPhoneServer(opts: PhoneServerOptions): McpServer {
  const settings: CallContext['opts'] = {
    phone: opts.phone,
    deviceId: opts.deviceId,
    now: opts.now ?? Date.now,
    leaseTtlMs: opts.leaseTtlMs ?? 5 * 60_000,
    idempotencyTtlMs: opts.idempotencyTtlMs ?? 24 * 60 * 60_000,
    idempotencyMaxEntries: opts.idempotencyMaxEntries ?? 1000,
    runStepDelayMs: opts.runStepDelayMs ?? 250,
  };
  const control = controlFor(opts.phone);
  const mcp = new McpServer(
    { name: opts.serverName ?? 'phonebridge-phone', version: SURFACE_VERSION },
    // The validator only serves elicitation, which the phone never sends; the SDK would build a
    // fresh Ajv per server (~20 KB and ~0.7 ms per socket), which a fleet of phones pays a thousand times.
    {
      // Tasks in both revisions: 2025-11-25 `tasks`, and the 2026-07-28 extension (decision 0183).
      capabilities: { logging: {}, tasks: TASKS_CAPABILITY, extensions: TASKS_EXTENSION_CAPABILITY },
      instructions: INSTRUCTIONS,
      jsonSchemaValidator: sharedValidator(),
    },
  );
  for (const spec of TOOLS) register(mcp, spec, (caller, extra) => new CallContext(caller, settings, control, extra));
  envelopeSdkErrors(mcp);
  const tasks = tasksFor(opts.phone);
  serveTasks(mcp, tasks, TASK_TOOLS);
  cacheToolList(mcp);
  handleCredentialRevoked(mcp, control, tasks);
  return mcp;
}

let validator: AjvJsonSchemaValidator | undefined;
const sharedValidator = () => (validator ??= new AjvJsonSchemaValidator());

/**
 * The surface is fixed (TOOLS never changes at run time), so its tools/list is the same for every
 * phone. The SDK converts all zod schemas to JSON Schema on each tools/list (~7 ms here), and the
 * relay fetches the list on every socket: compute it once per process and hand out the same object.
 */
let toolList: Promise<unknown> | undefined;
function cacheToolList(mcp: McpServer): void {
  const handlers = (mcp.server as unknown as { _requestHandlers: Map<string, RawRequestHandler> })._requestHandlers;
  const sdkListTools = handlers.get('tools/list');
  if (!sdkListTools) throw new Error('McpServer has no tools/list handler to wrap');
  handlers.set('tools/list', (request, extra) => {
    toolList ??= sdkListTools(request, extra).then(portableList, (error: unknown) => {
      toolList = undefined;
      throw error;
    });
    return toolList;
  });
}

function register(
  mcp: McpServer,
  spec: ToolSpec,
  context: (caller: Caller, extra: RequestHandlerExtra<ServerRequest, ServerNotification>) => CallContext,
) {
  const handler = async (
    args: unknown,
    extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  ): Promise<CallToolResult> => {
    try {
      const caller = callerFrom(extra._meta);
      // The relay filters by scope already; checking here too keeps a direct connection honest.
      if (!caller.scopes.includes(spec.scope)) {
        throw new ToolError('insufficient_scope', `${spec.name} needs the ${spec.scope} scope`, { scope: spec.scope });
      }
      const ctx = context(caller, extra);
      const value = await spec.run(args, ctx);
      const result = successResult(value, {
        content: ctx.attachments,
        _meta: Object.keys(ctx.resultMeta).length ? ctx.resultMeta : undefined,
      });
      const size = Buffer.byteLength(JSON.stringify(result));
      if (size > RESULT_LIMIT_BYTES) {
        return errorResult(
          'too_large',
          `the result would be ${size} bytes, over the ${RESULT_LIMIT_BYTES} byte limit of one message`,
        );
      }
      return result;
    } catch (error) {
      if (error instanceof ToolError) return errorResult(error.code, error.message, error.details);
      if (error instanceof SimError) return errorResult(error.code, error.message);
      throw error; // a bug: the SDK reports it, envelopeSdkErrors wraps it as internal_error
    }
  };
  mcp.registerTool(
    spec.name,
    {
      title: spec.title,
      description: `${spec.description}\n\n@since ${spec.since}`,
      inputSchema: spec.input,
      outputSchema: spec.output,
      annotations: { ...spec.annotations },
      _meta: { [SCOPE_META_KEY]: spec.scope, requiresUserInteraction: spec.requiresUserInteraction },
    },
    handler,
  );
}

type RawRequestHandler = (request: unknown, extra: unknown) => Promise<unknown>;

/** The listed schemas in the subset every model provider accepts (decision 0180); task support (0182). */
function portableList(list: unknown): unknown {
  const { tools, ...rest } = list as { tools: Array<Record<string, unknown>> };
  return {
    ...rest,
    tools: tools.map((t) => ({
      ...t,
      ...(TASK_TOOLS.has(t.name as string) ? { execution: { taskSupport: 'optional' } } : {}),
      inputSchema: portableSchema(t.inputSchema),
      ...(t.outputSchema ? { outputSchema: portableSchema(t.outputSchema) } : {}),
    })),
  };
}

/**
 * McpServer answers invalid input, unknown tools and its own output-validation failures with a
 * plain-text error; the surface promises the envelope on every error (docs/TOOLS.md). There is no public hook, so wrap
 * the tools/call handler it installed (a test pins this down should the SDK change).
 */
function envelopeSdkErrors(mcp: McpServer): void {
  const handlers = (mcp.server as unknown as { _requestHandlers: Map<string, RawRequestHandler> })._requestHandlers;
  const sdkCallTool = handlers.get('tools/call');
  if (!sdkCallTool) throw new Error('McpServer has no tools/call handler to wrap');
  handlers.set('tools/call', async (request, extra) => {
    // What the SDK's request parse would hide: arguments that are no object fail it with a
    // JSON-RPC internal error, and an own "__proto__" key is dropped by it (the tool would then
    // act without the argument, not refuse the unknown key).
    const args = (request as { params?: { arguments?: unknown } }).params?.arguments;
    if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args)))
      return errorResult('invalid_arguments', `arguments must be an object, not ${describeJsonType(args)}`);
    if (args !== undefined && Object.prototype.hasOwnProperty.call(args, '__proto__'))
      return errorResult('invalid_arguments', 'unknown key "__proto__" in arguments');
    const result = (await sdkCallTool(request, extra)) as CallToolResult;
    const text = result.isError && result.content?.[0]?.type === 'text' ? result.content[0].text : null;
    return text !== null && !isEnvelope(text) ? envelopeForSdkError(text) : result;
  });
}

function describeJsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'an array' : `a ${typeof v}`;
}
