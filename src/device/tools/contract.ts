// The fixed parts of the phone's tool surface (docs/TOOLS.md; docs/decisions/0004-0006):
// its version, who is calling, and the one error shape every failure takes.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { SCOPES, type Scope } from '../../store/types.ts';
import { wellFormed } from '../text.ts';

export { SCOPES, type Scope };

/** The launch surface: the baseline every later release only adds to. */
export const LAUNCH_VERSION = '2026.09.25';
/** wait_for_events' `timeout_ms`, the tool header of its wait (docs/decisions/0212-timeout-ms-tool-header.md). */
export const TIMEOUT_MS_SINCE = '2026.12.03';

/**
 * Version of the published tool surface, sent as the server info version. It is the date of the
 * release cycle that last added to the surface (calendar versioning): a client tells surfaces
 * apart by it instead of counting tools. Every tool description ends with `@since <version>`,
 * the release that added the tool; an added parameter's description ends with its own.
 */
export const SURFACE_VERSION = TIMEOUT_MS_SINCE;

/** What each release added, newest first: docs/TOOLS.md prints it as the surface's changelog. */
export const SURFACE_CHANGES: ReadonlyArray<{ version: string; change: string }> = [
  {
    version: TIMEOUT_MS_SINCE,
    change:
      '`wait_for_events` takes `timeout_ms` (optional): the wait in whole milliseconds, declared as the tool header `Mcp-Param-Timeout-Ms`. ' +
      'A change of meaning, not of shape: `type_text` fills a field up to 5000 UTF-16 units, as on Android, and drops the rest (the effect says how many characters were typed).',
  },
  { version: LAUNCH_VERSION, change: 'Launch: the baseline surface.' },
];

export const SCOPE_META_KEY = 'phonebridge/scope';
export const CALLER_META_KEY = 'phonebridge/caller';
/** Set in a result's `_meta` when an idempotency key replayed a recorded outcome. */
export const REPLAYED_META_KEY = 'phonebridge/replayed';

/** One JSON-RPC message per frame, never over this (the relay's limit). */
export const FRAME_LIMIT_BYTES = 256 * 1024;
/** A tool result must leave room in the frame for the JSON-RPC envelope around it. */
export const RESULT_LIMIT_BYTES = FRAME_LIMIT_BYTES - 4 * 1024;

export interface Caller {
  /** Token id; names the lease holder and namespaces idempotency keys. */
  credential: string;
  scopes: readonly Scope[];
}

/** Direct use (no relay in front): the local owner with every scope. */
export const LOCAL_CALLER: Caller = { credential: 'local', scopes: SCOPES };

/** Reads `params._meta["phonebridge/caller"]`, which the relay sets on every forwarded request. */
export function callerFrom(meta: Record<string, unknown> | undefined): Caller {
  const raw = meta?.[CALLER_META_KEY];
  if (raw === undefined) return LOCAL_CALLER;
  const value = raw as { credential?: unknown; scopes?: unknown };
  if (
    typeof value !== 'object' ||
    value === null ||
    typeof value.credential !== 'string' ||
    value.credential === '' ||
    !Array.isArray(value.scopes) ||
    !value.scopes.every((s) => typeof s === 'string')
  ) {
    throw new ToolError(
      'invalid_caller',
      `_meta["${CALLER_META_KEY}"] must be {"credential": string, "scopes": string[]}`,
    );
  }
  // Unknown scope names are ignored rather than trusted.
  return { credential: value.credential, scopes: SCOPES.filter((s) => (value.scopes as string[]).includes(s)) };
}

/** Every error code a tool call can return, for docs/TOOLS.md. Add, never rename. */
export const ERROR_CODES: Readonly<Record<string, string>> = {
  invalid_arguments:
    'The arguments do not match the input schema (unknown key, missing or malformed value, text that is not well-formed Unicode).',
  unknown_tool: 'No tool by that name.',
  invalid_caller: 'The caller meta set by the relay is malformed.',
  insufficient_scope: 'The credential lacks the scope of the tool (the relay normally refuses first).',
  lease_required:
    'Someone else holds the lease, or the device is free and your credential may not take it (no devices:lease).',
  lease_mismatch: 'The leaseId given is not the current lease (expired, released, or not yours). Nothing was done.',
  device_busy:
    'A run holds the device, or take_device found it leased to someone else. `retryAfterS` or `runId` may say more.',
  idempotency_key_reused: 'The idempotency key was recorded for a different call.',
  too_large: 'The result would not fit one 256 KiB message (e.g. a screenshot wider than the screen). Ask for less.',
  element_not_found: 'No element with that id on the current screen.',
  element_disabled: 'The element is disabled.',
  not_a_text_field: 'type_text was given an element that is not a text field.',
  no_focused_field: 'type_text with no focused text field and no elementId.',
  out_of_bounds: 'A coordinate lies outside the screen.',
  app_not_found: 'No installed app with that package name.',
  run_not_found: 'No such run (or no active run for stop_run).',
  cancelled:
    'A task-augmented call that ended unfinished (tasks/result): cancelled with tasks/cancel, expired, or its credential revoked.',
  upstream_unavailable:
    'Bridged phones only (`device run --backend bridge`): the MCP server behind the bridge is down or restarting, or the bridge is shutting down; the message says which. A call in flight when it went away may have run. Try again shortly.',
  internal_error: 'A bug on the phone; the message says what failed.',
};

/** A refusal the caller can act on; becomes `{"error":{"code","message",…details}}`. */
export class ToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/**
 * Errors carry their envelope in the text block and never structuredContent (clients validate that).
 * The message may quote what the caller sent (an unknown key or tool name): quoted with any half
 * of a surrogate pair as U+FFFD, so every JSON reader can read the error
 * (docs/decisions/0218-tool-strings-are-well-formed-unicode.md).
 */
export function errorResult(code: string, message: string, details: Record<string, unknown> = {}): CallToolResult {
  const error = { code, message: wellFormed(message), ...details };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error }) }] };
}

/** Success: structuredContent, and the same JSON in a text block for older consumers. */
export function successResult(value: Record<string, unknown>, extra: Partial<CallToolResult> = {}): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(value) }, ...(extra.content ?? [])],
    structuredContent: value,
    ...(extra._meta ? { _meta: extra._meta } : {}),
  };
}

/** Maps the SDK's own plain-text tool errors (bad input, unknown tool, bad output) to codes. */
export function envelopeForSdkError(text: string): CallToolResult {
  const message = text.replace(/^MCP error -?\d+: /, '');
  if (message.startsWith('Input validation error')) return errorResult('invalid_arguments', message);
  if (/^Tool .+ (not found|disabled)$/.test(message)) return errorResult('unknown_tool', message);
  return errorResult('internal_error', message);
}

export function isEnvelope(text: string): boolean {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown } };
    return typeof parsed?.error?.code === 'string';
  } catch {
    return false;
  }
}
