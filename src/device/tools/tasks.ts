// Tasks (MCP 2025-11-25 "tasks"): a task-augmented tools/call answers at once with a task,
// the tool runs on, and the client polls (tasks/get), waits for the result (tasks/result),
// lists (tasks/list) or cancels (tasks/cancel) it, through any relay node: the task id is the
// phone's and the relay forwards these like any other request (docs/decisions/0182-tasks.md).
// The 2026-07-28 tasks extension (SEP-2663) uses the same table with its own view of a task
// (task-server.ts, docs/decisions/0183-tasks-extension.md).
// A task belongs to the credential that created it: another credential gets "not found" and
// never sees it listed. Kept beside the phone (like PhoneControl), so tasks outlive a socket.
import { randomUUID } from 'node:crypto';
import type { SimPhone } from '../sim/model.ts';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
const TERMINAL: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'cancelled']);

/** The wire shape of a task (tasks/get, tasks/list, tasks/cancel, CreateTaskResult.task). */
export interface TaskInfo {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number;
  pollInterval: number;
}

/** What a task runs: the tool call, which must stop when the signal aborts. */
export type TaskWork = (signal: AbortSignal) => Promise<TaskOutcome>;
export type TaskOutcome = { result: Record<string, unknown>; failed: boolean };

interface Entry {
  info: TaskInfo;
  credential: string;
  abort: AbortController;
  /** Settles when the task reaches a terminal status. */
  done: Promise<void>;
  settle: () => void;
  result?: Record<string, unknown>;
  error?: string;
  expiry?: ReturnType<typeof setTimeout>;
}

/** Default, least and most time a task's result is kept after it was created. */
export const TASK_TTL_MS = { default: 60 * 60_000, min: 1_000, max: 24 * 60 * 60_000 } as const;
/** How often a client is asked to poll tasks/get. */
export const TASK_POLL_MS = 1_000;
/** Tasks kept per phone; beyond it the oldest finished ones go first. */
const MAX_TASKS = 1_000;
const PAGE = 50;

export class TaskNotFound extends Error {}
export class TaskAlreadyFinished extends Error {}
export class InvalidCursor extends Error {}

export class PhoneTasks {
  private readonly tasks = new Map<string, Entry>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Starts `work` as a task of `credential`; answers with the task as it stands (working). */
  create(credential: string, requestedTtl: unknown, work: TaskWork): TaskInfo {
    const ttl =
      typeof requestedTtl === 'number' && Number.isFinite(requestedTtl)
        ? Math.min(TASK_TTL_MS.max, Math.max(TASK_TTL_MS.min, Math.round(requestedTtl)))
        : TASK_TTL_MS.default;
    const at = new Date(this.now()).toISOString();
    let settle!: () => void;
    const done = new Promise<void>((r) => (settle = r));
    const entry: Entry = {
      info: {
        taskId: randomUUID(),
        status: 'working',
        createdAt: at,
        lastUpdatedAt: at,
        ttl,
        pollInterval: TASK_POLL_MS,
      },
      credential,
      abort: new AbortController(),
      done,
      settle,
    };
    this.evict();
    this.tasks.set(entry.info.taskId, entry);
    entry.expiry = setTimeout(() => this.forget(entry), ttl);
    entry.expiry.unref?.();
    work(entry.abort.signal).then(
      ({ result, failed }) => this.finish(entry, failed ? 'failed' : 'completed', { result }),
      (error: unknown) =>
        this.finish(entry, 'failed', { error: error instanceof Error ? error.message : String(error) }),
    );
    return { ...entry.info };
  }

  /** The task if `credential` created it; TaskNotFound otherwise (another's task is not found). */
  get(credential: string, taskId: unknown): TaskInfo {
    return { ...this.entry(credential, taskId).info };
  }

  /** Waits for a terminal status, then the tool's result (or why there is none). */
  async result(
    credential: string,
    taskId: unknown,
    signal?: AbortSignal,
  ): Promise<{ info: TaskInfo; result?: Record<string, unknown>; error?: string }> {
    const entry = this.entry(credential, taskId);
    if (!TERMINAL.has(entry.info.status)) {
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        signal?.addEventListener('abort', stop, { once: true });
        void entry.done.then(() => {
          signal?.removeEventListener('abort', stop);
          resolve();
        });
      });
    }
    return { info: { ...entry.info }, result: entry.result, error: entry.error };
  }

  /** The credential's tasks, oldest first, a page at a time (the cursor is an opaque offset). */
  list(credential: string, cursor: unknown): { tasks: TaskInfo[]; nextCursor?: string } {
    // A cursor this table never gave out is refused (MCP pagination: "Invalid cursors SHOULD
    // result in an error with code -32602"), not read as the first page.
    if (cursor !== undefined && !(typeof cursor === 'string' && /^\d{1,9}$/.test(cursor)))
      throw new InvalidCursor(`invalid cursor ${JSON.stringify(cursor)}: pass a nextCursor from tasks/list`);
    const mine = [...this.tasks.values()].filter((e) => e.credential === credential).map((e) => ({ ...e.info }));
    const from = cursor === undefined ? 0 : Number(cursor);
    const tasks = mine.slice(from, from + PAGE);
    return from + PAGE < mine.length ? { tasks, nextCursor: String(from + PAGE) } : { tasks };
  }

  /** The task with its outcome so far, without waiting (TaskNotFound as for get). */
  peek(credential: string, taskId: unknown): { info: TaskInfo; result?: Record<string, unknown>; error?: string } {
    const entry = this.entry(credential, taskId);
    return { info: { ...entry.info }, result: entry.result, error: entry.error };
  }

  /**
   * Asks a task of `credential` to stop (the extension's cancel: an ack whatever the state); a
   * finished task stays as it is. TaskNotFound as for get.
   */
  requestCancel(credential: string, taskId: unknown, message = 'cancelled by the client'): void {
    const entry = this.entry(credential, taskId);
    if (!TERMINAL.has(entry.info.status)) this.finish(entry, 'cancelled', { message });
  }

  /** Cancels a task of `credential`: its work is aborted; TaskAlreadyFinished for a terminal one. */
  cancel(credential: string, taskId: unknown, message = 'cancelled by the client'): TaskInfo {
    const entry = this.entry(credential, taskId);
    if (TERMINAL.has(entry.info.status))
      throw new TaskAlreadyFinished(`task ${entry.info.taskId} is already ${entry.info.status}`);
    this.finish(entry, 'cancelled', { message });
    return { ...entry.info };
  }

  /**
   * Cancels every unfinished task of a credential (its key was revoked): the work stops at the
   * phone. Returns how many were cancelled.
   */
  cancelCredential(credential: string, message = 'the credential was revoked'): number {
    let n = 0;
    for (const entry of this.tasks.values()) {
      if (entry.credential !== credential || TERMINAL.has(entry.info.status)) continue;
      this.finish(entry, 'cancelled', { message });
      n++;
    }
    return n;
  }

  private entry(credential: string, taskId: unknown): Entry {
    if (typeof taskId !== 'string') throw new TaskNotFound('params.taskId must be a string (the id tools/call gave)');
    const entry = this.tasks.get(taskId);
    if (!entry || entry.credential !== credential) throw new TaskNotFound(`no task ${taskId}`);
    return entry;
  }

  private finish(
    entry: Entry,
    status: TaskStatus,
    how: { result?: Record<string, unknown>; error?: string; message?: string },
  ): void {
    if (TERMINAL.has(entry.info.status)) return; // a late result after a cancel changes nothing
    entry.info.status = status;
    entry.info.lastUpdatedAt = new Date(this.now()).toISOString();
    if (how.message ?? how.error) entry.info.statusMessage = how.message ?? how.error;
    entry.result = how.result;
    entry.error = how.error;
    if (status === 'cancelled') entry.abort.abort();
    entry.settle();
  }

  private forget(entry: Entry): void {
    clearTimeout(entry.expiry);
    if (!TERMINAL.has(entry.info.status)) this.finish(entry, 'cancelled', { message: 'the task expired' });
    this.tasks.delete(entry.info.taskId);
  }

  /** Keeps the table bounded: drops the oldest finished tasks first, then the oldest of all. */
  private evict(): void {
    if (this.tasks.size < MAX_TASKS) return;
    for (const entry of this.tasks.values()) {
      if (TERMINAL.has(entry.info.status)) {
        this.forget(entry);
        return;
      }
    }
    const oldest = this.tasks.values().next().value;
    if (oldest) this.forget(oldest);
  }
}

const byPhone = new WeakMap<SimPhone, PhoneTasks>();
/** The task table of a phone, shared by every connection to it. */
export function tasksFor(phone: SimPhone): PhoneTasks {
  let t = byPhone.get(phone);
  if (!t) byPhone.set(phone, (t = new PhoneTasks()));
  return t;
}
