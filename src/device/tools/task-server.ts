// Serves tasks (src/device/tools/tasks.ts) on a phone's McpServer in both revisions, chosen per
// request by the revision in its _meta (docs/decisions/0183-tasks-extension.md):
// - 2025-11-25 tasks: task-augmented tools/call (params.task) for the tools that offer it,
//   tasks/get, tasks/result, tasks/list, tasks/cancel (decision 0182);
// - 2026-07-28 tasks extension (SEP-2663): a tools/call of such a tool from a client that
//   declared the extension may be answered with a task (resultType "task", flat), tasks/get
//   inlines the result or error, tasks/update and tasks/cancel are acks.
// A revoked credential's tasks are cancelled from src/device/tools/revocation.ts.
// The SDK's own task support keys tasks by transport session; every client of a phone shares
// one socket, so tasks here are keyed by the caller's credential instead (decision 0182).
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  classifyEra,
  declaresTasks,
  MISSING_REQUIRED_CLIENT_CAPABILITY,
  TASKS_EXTENSION,
} from '../../protocol/stateless.ts';
import { wellFormed } from '../text.ts';
import { callerFrom, errorResult, type ToolError } from './contract.ts';
import { InvalidCursor, TaskAlreadyFinished, TaskNotFound, type PhoneTasks, type TaskInfo } from './tasks.ts';

export const RELATED_TASK_META_KEY = 'io.modelcontextprotocol/related-task';
/** What the phone advertises in initialize: tasks for tools/call, listable and cancellable. */
export const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };
/** …and the 2026-07-28 extension, under capabilities.extensions (no settings are defined). */
export const TASKS_EXTENSION_CAPABILITY = { [TASKS_EXTENSION]: {} };
/**
 * An extension task that ends this soon after the call is answered with its plain result
 * instead (SEP-2663 lets the server decide per request): a wait_for_events with events pending
 * costs the client no polling.
 */
export const IMMEDIATE_RESULT_MS = 250;

type Extra = {
  signal: AbortSignal;
  _meta?: Record<string, unknown>;
  sendNotification: (n: unknown) => Promise<void>;
  sendRequest: (...a: unknown[]) => Promise<unknown>;
};
type Handler = (request: unknown, extra: Extra) => Promise<unknown>;
type Req = { method: string; params?: Record<string, unknown> };

/** A request of revision 2026-07-28 (its version in _meta, as the relay forwards it). */
const isModern = (request: unknown) => classifyEra({}, request) === 'stateless';

function missingExtension(method: string): McpError {
  return new McpError(
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    `Missing required client capability: ${method} needs the ${TASKS_EXTENSION} extension`,
    { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
  );
}

/**
 * The extension's view of a task: ttlMs/pollIntervalMs, and a tool that ended with an error
 * result is `completed` (its result says isError), `failed` only when there is no result.
 */
export function extensionView(
  info: TaskInfo,
  outcome?: { result?: Record<string, unknown>; error?: string },
): Record<string, unknown> {
  const status = info.status === 'failed' && outcome?.result ? 'completed' : info.status;
  const out: Record<string, unknown> = {
    taskId: info.taskId,
    status,
    ...(info.statusMessage && status !== 'completed' ? { statusMessage: info.statusMessage } : {}),
    createdAt: info.createdAt,
    lastUpdatedAt: info.lastUpdatedAt,
    ttlMs: info.ttl,
    pollIntervalMs: info.pollInterval,
  };
  if (!outcome) return out;
  if (status === 'completed' && outcome.result) out.result = outcome.result;
  if (status === 'failed') out.error = { code: ErrorCode.InternalError, message: outcome.error ?? 'the task failed' };
  return out;
}

export function serveTasks(mcp: McpServer, tasks: PhoneTasks, taskTools: ReadonlySet<string>): void {
  const handlers = (mcp.server as unknown as { _requestHandlers: Map<string, Handler> })._requestHandlers;
  const callTool = handlers.get('tools/call');
  if (!callTool) throw new Error('McpServer has no tools/call handler to wrap');

  const credentialOf = (params: Record<string, unknown> | undefined): string => {
    try {
      return callerFrom(params?._meta as Record<string, unknown> | undefined).credential;
    } catch (error) {
      throw new McpError(ErrorCode.InvalidParams, (error as ToolError).message);
    }
  };
  const known = <T>(f: () => T): T => {
    try {
      return f();
    } catch (error) {
      // The message quotes the id or cursor sent: never with half a surrogate pair in it
      // (docs/decisions/0218-tool-strings-are-well-formed-unicode.md).
      if (error instanceof TaskNotFound || error instanceof TaskAlreadyFinished || error instanceof InvalidCursor)
        throw new McpError(ErrorCode.InvalidParams, wellFormed(error.message));
      throw error;
    }
  };

  handlers.set('tools/call', async (request, extra) => {
    const { params } = request as Req;
    if (isModern(request)) return extensionCall(request as Req, extra);
    const task = params?.task as { ttl?: unknown } | undefined;
    if (task === undefined) return callTool(request, extra);
    const name = String(params?.name);
    // "forbidden": a task-augmented call of a tool without task support is not found as such.
    if (!taskTools.has(name))
      throw new McpError(ErrorCode.MethodNotFound, `${name} cannot run as a task (execution.taskSupport: forbidden)`);
    return { task: start(request as Req, extra, task?.ttl) };
  });

  /** Starts the call as a task of its caller; the tool runs under the task's own signal. */
  const start = (request: Req, extra: Extra, ttl: unknown): TaskInfo => {
    const params = request.params!;
    const credential = credentialOf(params);
    const { task: _task, ...plain } = params;
    const meta = { ...((plain._meta as Record<string, unknown>) ?? {}) };
    delete meta.progressToken; // the request is answered at once: nothing to report progress on
    return tasks.create(credential, ttl, async (signal) => {
      const result = (await callTool(
        { ...request, params: { ...plain, _meta: meta } },
        {
          ...extra,
          signal,
          _meta: meta,
          // The creating request is answered already; what the tool would send on it goes nowhere.
          sendNotification: () => Promise.resolve(),
          sendRequest: () => Promise.reject(new Error('a task cannot ask the client')),
        },
      )) as CallToolResult;
      return { result: result, failed: result.isError === true };
    });
  };

  /**
   * 2026-07-28: the legacy `task` member means nothing; a tool that offers tasks runs as one when
   * the request declares the extension, answered with the flat CreateTaskResult unless it ended
   * within IMMEDIATE_RESULT_MS (then its plain result). Without the extension: a plain call.
   */
  const extensionCall = async (request: Req, extra: Extra): Promise<unknown> => {
    const { task: _legacy, ...params } = request.params ?? {};
    const plain = { ...request, params };
    const name = String(params.name);
    if (!taskTools.has(name) || !declaresTasks(params._meta as Record<string, unknown> | undefined))
      return callTool(plain, extra);
    const info = start(plain, extra, undefined);
    const credential = credentialOf(params);
    const done = await tasks.result(credential, info.taskId, AbortSignal.timeout(IMMEDIATE_RESULT_MS));
    if (done.result && done.info.status !== 'working' && done.info.status !== 'cancelled') return done.result;
    return { resultType: 'task', ...extensionView(tasks.get(credential, info.taskId)) };
  };

  /** The extension's tasks/*: only for a request that declared it (else -32021). */
  const extensionTask = (params: Record<string, unknown> | undefined, method: string): string => {
    if (!declaresTasks(params?._meta as Record<string, unknown> | undefined)) throw missingExtension(method);
    return credentialOf(params);
  };

  handlers.set('tasks/update', (request) => {
    const { params } = request as Req;
    if (!isModern(request)) throw new McpError(ErrorCode.MethodNotFound, 'Method not found: tasks/update');
    // The phone's tasks never ask the client for input: answers to no outstanding request are
    // ignored, as the extension says; an unknown task is not found.
    known(() => tasks.get(extensionTask(params, 'tasks/update'), params?.taskId));
    return Promise.resolve({ resultType: 'complete' });
  });

  handlers.set('tasks/get', (request) => {
    const { params } = request as Req;
    if (isModern(request)) {
      const credential = extensionTask(params, 'tasks/get');
      const { info, result, error } = known(() => tasks.peek(credential, params?.taskId));
      return Promise.resolve({ resultType: 'complete', ...extensionView(info, { result, error }) });
    }
    return Promise.resolve(known(() => tasks.get(credentialOf(params), params?.taskId)));
  });

  handlers.set('tasks/list', (request) => {
    const { params } = request as Req;
    if (isModern(request)) throw new McpError(ErrorCode.MethodNotFound, 'Method not found: tasks/list');
    return Promise.resolve(known(() => tasks.list(credentialOf(params), params?.cursor)));
  });

  handlers.set('tasks/cancel', (request) => {
    const { params } = request as Req;
    if (isModern(request)) {
      // An ack, also for a task that already ended; the outcome shows on tasks/get.
      known(() => tasks.requestCancel(extensionTask(params, 'tasks/cancel'), params?.taskId));
      return Promise.resolve({ resultType: 'complete' });
    }
    return Promise.resolve(known(() => tasks.cancel(credentialOf(params), params?.taskId)));
  });

  handlers.set('tasks/result', async (request, extra) => {
    const { params } = request as Req;
    if (isModern(request)) throw new McpError(ErrorCode.MethodNotFound, 'Method not found: tasks/result');
    const credential = credentialOf(params);
    known(() => tasks.get(credential, params?.taskId)); // not found: refused before any wait
    const { info, result, error } = await tasks.result(credential, params?.taskId, extra.signal);
    const related = { [RELATED_TASK_META_KEY]: { taskId: info.taskId } };
    if (result) return { ...result, _meta: { ...((result._meta as object) ?? {}), ...related } };
    if (info.status === 'working' || info.status === 'input_required')
      throw new McpError(ErrorCode.InvalidParams, `task ${info.taskId} is still ${info.status}`);
    // Cancelled, expired, or the tool threw: the surface's error envelope says which.
    const code = info.status === 'cancelled' ? 'cancelled' : 'internal_error';
    return {
      ...errorResult(code, info.statusMessage ?? error ?? `task ${info.status}`),
      _meta: related,
    };
  });
}
