// Which credential created each upstream task the bridge passed on. The upstream server sees
// one client (the bridge) and keys its tasks by that one session, so every credential behind
// the relay would see every task; the bridge remembers the creator of each task id and answers
// anyone else as for an unknown task (as the reference phone does, docs/decisions/0182-tasks.md).
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { callerFrom } from '../tools/contract.ts';

/** Task ids remembered; beyond it the oldest are forgotten (their tasks become not found). */
const MAX_OWNED = 10_000;

export class TaskOwners {
  private readonly owners = new Map<string, string>();

  /**
   * Records the creator of the task a tools/call was answered with: a 2025-11-25 task-augmented
   * call's `{task: {taskId}}`, or the tasks extension's flat `{resultType: "task", taskId}`.
   * Other results are not tasks.
   */
  created(meta: Record<string, unknown> | undefined, result: unknown): void {
    const r = (result ?? {}) as { task?: { taskId?: unknown }; resultType?: unknown; taskId?: unknown };
    const taskId = r.resultType === 'task' ? r.taskId : r.task?.taskId;
    if (typeof taskId !== 'string') return;
    if (this.owners.size >= MAX_OWNED) this.owners.delete(this.owners.keys().next().value!);
    this.owners.set(taskId, credentialOf(meta));
  }

  /** Throws "not found" unless the caller created the task. */
  check(meta: Record<string, unknown> | undefined, taskId: string): void {
    if (this.owners.get(taskId) !== credentialOf(meta))
      throw new McpError(ErrorCode.InvalidParams, `Failed to retrieve task: Task not found (${taskId})`);
  }

  /** The tasks of a tasks/list page that the caller created. */
  visible<T extends { taskId: string }>(meta: Record<string, unknown> | undefined, tasks: T[]): T[] {
    const me = credentialOf(meta);
    return tasks.filter((t) => this.owners.get(t.taskId) === me);
  }
}

function credentialOf(meta: Record<string, unknown> | undefined): string {
  try {
    return callerFrom(meta).credential;
  } catch (error) {
    throw new McpError(ErrorCode.InvalidParams, (error as Error).message);
  }
}
