// Serves tasks (src/device/tools/tasks.ts) on a phone's McpServer: task-augmented tools/call
// for the tools that offer it, tasks/get, tasks/result, tasks/list, tasks/cancel. A revoked
// credential's tasks are cancelled from src/device/tools/revocation.ts.
// The SDK's own task support keys tasks by transport session; every client of a phone shares
// one socket, so tasks here are keyed by the caller's credential instead (decision 0182).
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callerFrom, errorResult, type ToolError } from './contract.ts';
import { TaskAlreadyFinished, TaskNotFound, type PhoneTasks } from './tasks.ts';

export const RELATED_TASK_META_KEY = 'io.modelcontextprotocol/related-task';
/** What the phone advertises in initialize: tasks for tools/call, listable and cancellable. */
export const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

type Extra = {
  signal: AbortSignal;
  _meta?: Record<string, unknown>;
  sendNotification: (n: unknown) => Promise<void>;
  sendRequest: (...a: unknown[]) => Promise<unknown>;
};
type Handler = (request: unknown, extra: Extra) => Promise<unknown>;
type Req = { method: string; params?: Record<string, unknown> };

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
      if (error instanceof TaskNotFound || error instanceof TaskAlreadyFinished)
        throw new McpError(ErrorCode.InvalidParams, error.message);
      throw error;
    }
  };

  handlers.set('tools/call', async (request, extra) => {
    const { params } = request as Req;
    const task = params?.task as { ttl?: unknown } | undefined;
    if (task === undefined) return callTool(request, extra);
    const name = String(params?.name);
    // "forbidden": a task-augmented call of a tool without task support is not found as such.
    if (!taskTools.has(name))
      throw new McpError(ErrorCode.MethodNotFound, `${name} cannot run as a task (execution.taskSupport: forbidden)`);
    const credential = credentialOf(params);
    const { task: _task, ...plain } = params!;
    const meta = { ...((plain._meta as Record<string, unknown>) ?? {}) };
    delete meta.progressToken; // the request is answered at once: nothing to report progress on
    const info = tasks.create(credential, task?.ttl, async (signal) => {
      const result = (await callTool(
        { ...(request as Req), params: { ...plain, _meta: meta } },
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
    return { task: info };
  });

  handlers.set('tasks/get', (request) => {
    const { params } = request as Req;
    return Promise.resolve(known(() => tasks.get(credentialOf(params), params?.taskId)));
  });

  handlers.set('tasks/list', (request) => {
    const { params } = request as Req;
    return Promise.resolve(tasks.list(credentialOf(params), params?.cursor));
  });

  handlers.set('tasks/cancel', (request) => {
    const { params } = request as Req;
    return Promise.resolve(known(() => tasks.cancel(credentialOf(params), params?.taskId)));
  });

  handlers.set('tasks/result', async (request, extra) => {
    const { params } = request as Req;
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
