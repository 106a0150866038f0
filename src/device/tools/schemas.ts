// Input and output schemas of every tool. Inputs are z.strictObject passed whole to the SDK:
// a raw shape would become a plain z.object, which silently strips unknown keys like `leaseid`.
import * as z from 'zod';
import { TIMEOUT_MS_HEADER, X_MCP_HEADER } from '../../protocol/timeouts.ts';
import { EVENT_TYPES, KEYS } from '../sim/model.ts';
import { loneSurrogate } from '../text.ts';
import { TIMEOUT_MS_SINCE } from './contract.ts';

/** wait_for_events: the wait when the caller names none, and the longest it may name. */
export const WAIT_DEFAULT_S = 30;
export const WAIT_MAX_S = 600;

// ---- shared input fields ------------------------------------------------------

/**
 * Text an agent sends must be well-formed Unicode: half a surrogate pair is no character, and
 * a result that carried it back could not be parsed by strict JSON readers
 * (docs/decisions/0218-tool-strings-are-well-formed-unicode.md).
 */
const text = (min: number, max: number) =>
  (min > 0 ? z.string().min(min) : z.string()).max(max).check((ctx) => {
    const lone = loneSurrogate(ctx.value);
    if (lone) ctx.issues.push({ code: 'custom', input: ctx.value, message: `not well-formed Unicode (${lone})` });
  });

const leaseId = text(1, 200)
  .optional()
  .describe(
    'Lease to act under. Omit to use your current lease, or to take a free device when your credential has devices:lease. A stale id is refused with lease_mismatch.',
  );
const idempotencyKey = text(1, 200)
  .optional()
  .describe(
    'Retrying with the same key replays the recorded outcome instead of acting again. Keys are per credential.',
  );
const pixel = z.number().int().min(0).max(100_000);
const elementId = text(1, 200);

const pointTarget = {
  x: pixel.optional().describe('Screen x in pixels (with y).'),
  y: pixel.optional().describe('Screen y in pixels (with x).'),
  elementId: elementId.optional().describe('Element id from observe_screen, instead of x/y: its centre is used.'),
};
const hasOnePoint = (v: { x?: number; y?: number; elementId?: string }) =>
  v.elementId !== undefined ? v.x === undefined && v.y === undefined : v.x !== undefined && v.y !== undefined;
const onePoint = { message: 'give x and y, or elementId (not both)' };

const swipeTarget = {
  startX: pixel.optional(),
  startY: pixel.optional(),
  endX: pixel.optional(),
  endY: pixel.optional(),
  elementId: elementId.optional().describe('Swipe across this element instead of giving coordinates (with direction).'),
  direction: z
    .enum(['up', 'down', 'left', 'right'])
    .optional()
    .describe('Where the finger moves; "up" scrolls a list down.'),
};
const hasOneSwipe = (v: {
  startX?: number;
  startY?: number;
  endX?: number;
  endY?: number;
  elementId?: string;
  direction?: string;
}) => {
  const coords = [v.startX, v.startY, v.endX, v.endY].filter((c) => c !== undefined).length;
  return v.elementId !== undefined
    ? coords === 0 && v.direction !== undefined
    : coords === 4 && v.direction === undefined;
};
const oneSwipe = { message: 'give startX, startY, endX and endY, or elementId with direction' };

const holdFields = {
  ...pointTarget,
  durationMs: z
    .number()
    .int()
    .min(500)
    .max(10_000)
    .optional()
    .describe('Press length; default 800. The simulator treats every hold as a long press.'),
};
const typeFields = {
  text: text(1, 5000),
  elementId: elementId.optional().describe('Text field to focus first; default: the focused field.'),
};
const keyFields = { key: z.enum(KEYS) };
const openAppFields = {
  packageName: text(1, 200).describe('Android package name, e.g. com.android.settings.'),
};

const withUse = { leaseId, idempotencyKey };

// ---- act tools, and the same actions as run steps -------------------------------

export const tapInput = z.strictObject({ ...pointTarget, ...withUse }).refine(hasOnePoint, onePoint);
export const holdInput = z.strictObject({ ...holdFields, ...withUse }).refine(hasOnePoint, onePoint);
export const swipeInput = z.strictObject({ ...swipeTarget, ...withUse }).refine(hasOneSwipe, oneSwipe);
export const typeTextInput = z.strictObject({ ...typeFields, ...withUse });
export const pressKeyInput = z.strictObject({ ...keyFields, ...withUse });
export const openAppInput = z.strictObject({ ...openAppFields, ...withUse });

export const runStep = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('tap'), ...pointTarget }).refine(hasOnePoint, onePoint),
  z.strictObject({ action: z.literal('hold'), ...holdFields }).refine(hasOnePoint, onePoint),
  z.strictObject({ action: z.literal('swipe'), ...swipeTarget }).refine(hasOneSwipe, oneSwipe),
  z.strictObject({ action: z.literal('type_text'), ...typeFields }),
  z.strictObject({ action: z.literal('press_key'), ...keyFields }),
  z.strictObject({ action: z.literal('open_app'), ...openAppFields }),
  z.strictObject({ action: z.literal('wait'), ms: z.number().int().min(0).max(60_000) }),
]);
export type RunStep = z.infer<typeof runStep>;
export type Action = Exclude<RunStep['action'], 'wait'>;

export const actOutput = z.object({
  deviceId: z.string(),
  action: z.enum(['tap', 'hold', 'swipe', 'type_text', 'press_key', 'open_app']),
  effect: z.string().describe('What the action did, in words.'),
  elementId: z.string().nullable().describe('Element acted on, if any.'),
  x: z.number().int().nullable(),
  y: z.number().int().nullable(),
  app: z.string().describe('Foreground package after the action.'),
  screen: z.string(),
  title: z.string(),
  cursor: z.number().int().describe('Event cursor after the action, for wait_for_events.'),
  leaseId: z.string().nullable().describe('Lease the action ran under (taken implicitly if the device was free).'),
  performedAt: z.number().int().describe('Milliseconds since the epoch.'),
});
export type ActOutput = z.infer<typeof actOutput>;

// ---- read tools ---------------------------------------------------------------

export const listDevicesInput = z.strictObject({});
export const listDevicesOutput = z.object({
  devices: z.array(
    z.object({
      deviceId: z.string(),
      model: z.string(),
      screen: z.object({ width: z.number().int(), height: z.number().int() }),
      foregroundApp: z.string(),
      installedApps: z.array(z.object({ package: z.string(), label: z.string() })),
      lease: z.object({
        state: z.enum(['free', 'yours', 'others']),
        leaseId: z.string().nullable().describe('Only when the lease is yours.'),
        expiresAt: z.number().int().nullable(),
      }),
      run: z.object({ runId: z.string(), status: z.literal('running') }).nullable(),
    }),
  ),
});

export const observeScreenInput = z.strictObject({
  screenshot: z
    .strictObject({
      include: z.boolean().default(true),
      width: z
        .number()
        .int()
        .min(1)
        .max(100_000)
        .optional()
        .describe('Output width in pixels; at most the screen width.'),
      scale: z
        .number()
        // min, not positive(): exclusiveMinimum is outside the portable subset (decision 0180).
        .min(0.01)
        .max(100)
        .optional()
        .describe('Output size relative to the screen (e.g. 0.5); at most 1. Ignored when width is given.'),
    })
    .optional()
    .describe(
      'Add a PNG as an image content block. Default size: half the screen, or smaller when a screen full of text would not fit one message (screenshot.width says). A size asked for that does not fit: too_large.',
    ),
  leaseId,
});

const bounds = z.object({
  left: z.number().int(),
  top: z.number().int(),
  right: z.number().int(),
  bottom: z.number().int(),
});
export const observeScreenOutput = z.object({
  deviceId: z.string(),
  app: z.string(),
  screen: z.string(),
  title: z.string(),
  width: z.number().int(),
  height: z.number().int(),
  focusedElementId: z.string().nullable(),
  elements: z.array(
    z.object({
      id: z.string(),
      role: z.string(),
      text: z.string(),
      bounds,
      enabled: z.boolean(),
      focused: z.boolean(),
      checked: z.boolean().optional(),
      parentId: z.string().nullable(),
    }),
  ),
  cursor: z.number().int(),
  leaseId: z.string().nullable(),
  screenshot: z
    .object({
      mimeType: z.literal('image/png'),
      width: z.number().int(),
      height: z.number().int(),
      bytes: z.number().int(),
    })
    .nullable()
    .describe('Describes the image content block, when one was asked for.'),
});

export const waitForEventsInput = z.strictObject({
  cursor: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      "Return events after this cursor; default: only new ones. A cursor ahead of the phone's (the phone restarted since) returns every event since the restart.",
    ),
  // Seconds as the surface published them: a number, fractions allowed (the surface is frozen:
  // narrowing it to integers would refuse calls that worked). A tool header may only carry an
  // integer, string or boolean, so this one has none (docs/decisions/0184-timeout-s-stays-a-number.md).
  // Optional with the default as an annotation rather than `.default(30)`, so the tool can tell
  // a timeout_s the caller gave from the default when timeout_ms comes too; the published
  // schema is unchanged.
  timeout_s: z
    .number()
    .min(0)
    .max(WAIT_MAX_S)
    .optional()
    .meta({ default: WAIT_DEFAULT_S })
    .describe('Wait at most this long when nothing is pending; 0 returns at once.'),
  // The same wait as whole milliseconds, declared as the tool header Mcp-Param-Timeout-Ms so a
  // gateway sizes its own timeout without reading the body (an addition of 2026.12.03:
  // docs/decisions/0212-timeout-ms-tool-header.md).
  timeout_ms: z
    .number()
    .int()
    .min(0)
    .max(WAIT_MAX_S * 1000)
    .optional()
    .meta({ [X_MCP_HEADER]: TIMEOUT_MS_HEADER })
    .describe(
      `The same wait in whole milliseconds, sent again as the tool header Mcp-Param-${TIMEOUT_MS_HEADER} on revision 2026-07-28 so gateways can size their own timeout. Give timeout_s or timeout_ms, not both. @since ${TIMEOUT_MS_SINCE}`,
    ),
  types: z.array(z.enum(EVENT_TYPES)).min(1).optional(),
  leaseId,
});
export const phoneEvent = z.object({
  seq: z.number().int(),
  type: z.enum(EVENT_TYPES),
  at: z.number().int(),
  app: z.string(),
  previousApp: z.string().optional(),
  screen: z.string().optional(),
  title: z.string().optional(),
  text: z.string().optional(),
});
export const waitForEventsOutput = z.object({
  events: z.array(phoneEvent),
  cursor: z.number().int().describe('Pass back to get only later events.'),
  timedOut: z.boolean(),
  more: z.boolean().describe('More events are pending than fit in one result.'),
});

// ---- leases -------------------------------------------------------------------

export const takeDeviceInput = z.strictObject({});
export const takeDeviceOutput = z.object({
  deviceId: z.string(),
  leaseId: z.string(),
  expiresAt: z.number().int(),
  ttlS: z.number().int().describe('Every use renews the lease for this long.'),
  renewed: z.boolean().describe('You already held it.'),
});
export const releaseDeviceInput = z.strictObject({ leaseId: text(1, 200) });
export const releaseDeviceOutput = z.object({ deviceId: z.string(), leaseId: z.string(), released: z.literal(true) });

// ---- runs ---------------------------------------------------------------------

export const startRunInput = z.strictObject({
  goal: text(0, 2000).default('').describe('What the run is for, shown in get_run.'),
  steps: z.array(runStep).min(1).max(200),
  wait: z
    .boolean()
    .default(true)
    .describe(
      'Answer when the run ends, with progress notifications meanwhile (needs a live connection). false: answer at once and watch with get_run.',
    ),
  leaseId,
  idempotencyKey,
});
export const runInfo = z.object({
  runId: z.string(),
  deviceId: z.string(),
  status: z.enum(['running', 'completed', 'stopped', 'failed']),
  goal: z.string(),
  stepsTotal: z.number().int(),
  stepsDone: z.number().int(),
  startedAt: z.number().int(),
  endedAt: z.number().int().nullable(),
  failure: z.object({ code: z.string(), message: z.string() }).nullable(),
});
export const getOutcomeInput = z.strictObject({ idempotencyKey: text(1, 200) });
export const getOutcomeOutput = z.object({
  idempotencyKey: z.string(),
  found: z.boolean(),
  tool: z.string().nullable(),
  recordedAt: z.number().int().nullable(),
  // The tools that record an outcome are the act tools and start_run: their results, not an
  // open map, so the schema says what a replay holds (decision 0180).
  result: z.union([actOutput, runInfo]).nullable().describe('The structured result the key replays.'),
});

export const getRunInput = z.strictObject({
  runId: text(1, 200).optional().describe('Default: the active run, else the latest.'),
});
export const stopRunInput = z.strictObject({
  runId: text(1, 200).optional().describe('Default: the active run.'),
});
