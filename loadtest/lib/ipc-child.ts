// Benchmark processes that talk over IPC: the parent forks a child (`forkChild`) and calls it
// by operation, `{ op, id, ... }` answered `{ reply: id, result | error }`, or waits for a
// message it announces (`{ type }`); the child answers with `serveParent` and exits when the
// parent goes. Every wait is bounded, and a child that exits fails what waited on it.
import { fork, type ChildProcess } from 'node:child_process';

type Json = any;

export interface Child {
  proc: ChildProcess;
  call<T = Json>(msg: Json, timeoutMs?: number): Promise<T>;
  next<T = Json>(type: string, timeoutMs?: number): Promise<T>;
  stop(): Promise<void>;
}

/** `execPath`: what runs the child instead of this Node (e.g. a wrapper that starts it under valgrind). */
export function forkChild(file: string, args: string[], execArgv: string[] = [], execPath?: string): Child {
  const proc = fork(file, args, {
    execArgv: ['--import', 'tsx', ...execArgv],
    ...(execPath ? { execPath } : {}),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let seq = 1;
  const waiting = new Map<number, (m: Json) => void>();
  const typed: Array<{ type: string; resolve: (m: Json) => void }> = [];
  const seen: Json[] = [];
  proc.on('message', (m: Json) => {
    if (m?.reply !== undefined) return waiting.get(m.reply)?.(m);
    const i = typed.findIndex((t) => t.type === m?.type);
    if (i >= 0) typed.splice(i, 1)[0].resolve(m);
    else seen.push(m);
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const bounded = <T>(p: Promise<T>, ms: number, what: string) =>
    Promise.race([
      p,
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`${what} timed out`)), ms).unref()),
      exited.then(() => Promise.reject(new Error(`${file} exited during ${what}`))),
    ]);
  return {
    proc,
    call: (msg, timeoutMs = 120_000) => {
      const id = seq++;
      const p = new Promise<Json>((resolve) => waiting.set(id, resolve));
      proc.send({ ...msg, id });
      return bounded(p, timeoutMs, msg.op).then((m) => {
        waiting.delete(id);
        if (m.error) throw new Error(m.error);
        return m.result;
      });
    },
    next: (type, timeoutMs = 60_000) => {
      const i = seen.findIndex((m) => m?.type === type);
      if (i >= 0) return Promise.resolve(seen.splice(i, 1)[0]);
      return bounded(new Promise((resolve) => typed.push({ type, resolve })), timeoutMs, `waiting for ${type}`);
    },
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000).unref())]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

export function serveParent(handlers: Record<string, (m: Json) => Promise<unknown>>): void {
  process.on('message', (m: Json) => {
    const h = handlers[m.op];
    if (!h) return;
    h(m).then(
      (result) => process.send!({ reply: m.id, result }),
      (err) => process.send!({ reply: m.id, error: String((err as Error).stack ?? err) }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
