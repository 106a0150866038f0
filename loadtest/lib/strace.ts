// strace attached to a running process, for syscall counts in the load tests: relay-overhead's
// sends and event-loop iterations per call (traceCalls), storm's syscalls per accept
// (traceSyscalls, strace's own summary).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Starts `strace ARGS -p pid`; resolves once it has attached (or after 5 s). */
async function attach(
  pid: number,
  args: string[],
): Promise<{ child: ChildProcess; exited: Promise<void>; err: () => string }> {
  const child = spawn('strace', [...args, '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve) => {
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (err.includes(`Process ${pid} attached`)) resolve();
    });
    void exited.then(resolve);
    setTimeout(resolve, 5000).unref();
  });
  return { child, exited, err: () => err };
}

/**
 * Attaches `strace -c -f` to `pid` (only `syscalls` when given), writing its summary to `file`;
 * resolves once strace has attached (or after 5 s). `stop()` detaches and resolves the calls
 * per syscall, or undefined when strace wrote no summary.
 */
export async function traceSyscalls(
  pid: number,
  file: string,
  syscalls?: readonly string[],
): Promise<{ stop(): Promise<Record<string, number> | undefined> }> {
  const filter = syscalls ? ['-e', `trace=${syscalls.join(',')}`] : [];
  const { child, exited, err } = await attach(pid, ['-c', '-f', ...filter, '-o', file]);
  return {
    async stop() {
      child.kill('SIGINT');
      await exited;
      try {
        const calls: Record<string, number> = {};
        // "% time  seconds  usecs/call  calls  errors  syscall" rows; errors may be blank.
        for (const line of readFileSync(file, 'utf8').split('\n')) {
          const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
          if (m && m[2] !== 'total') calls[m[2]] = (calls[m[2]] ?? 0) + Number(m[1]);
        }
        return calls;
      } catch {
        console.error(`strace on ${pid} gave no summary (${err().trim().slice(0, 200)})`);
        return undefined;
      }
    },
  };
}

/** What traceCalls counted. */
export interface SyscallTally {
  /** Calls per syscall, every thread. */
  calls: Record<string, number>;
  /**
   * The main thread's event-loop iterations. Node has libuv measure its idle time
   * (UV_METRICS_IDLE_TIME), and libuv then begins every poll of the loop with an epoll wait
   * without a timeout; when that finds nothing and the loop may sleep, a second wait with the
   * timeout follows. So an iteration is one wait without a timeout, and its epoll waits are one
   * or two: counting the waits counts each iteration that slept twice.
   */
  loopIterations: number;
  /** The main thread's waits with a timeout: the iterations that went to sleep (or slept on). */
  loopSleeps: number;
}

/**
 * Reads the lines of `strace -f -e raw=epoll_wait,epoll_pwait -o FILE -p mainTid`. With -f each
 * line starts with its thread's id; a call another thread interrupts is split into an
 * `<unfinished ...>` line, counted, and a `<... resumed>` one, not counted. Raw decoding prints
 * an epoll wait's arguments on entry, so its timeout (the fourth) is on the first line.
 */
export function tallyTrace(text: string, mainTid: number): SyscallTally {
  const tally: SyscallTally = { calls: {}, loopIterations: 0, loopSleeps: 0 };
  for (const line of text.split('\n')) {
    const m = /^(?:(\d+)\s+)?(\w+)\((.*)$/.exec(line);
    if (!m) continue;
    const name = m[2];
    tally.calls[name] = (tally.calls[name] ?? 0) + 1;
    if (!name.startsWith('epoll_') || (m[1] !== undefined && Number(m[1]) !== mainTid)) continue;
    const timeout = m[3]
      .split(',')[3]
      ?.trim()
      .replace(/\s*<unfinished \.\.\.>$/, '');
    if (timeout === undefined) continue;
    if (Number(timeout) === 0) tally.loopIterations++;
    else tally.loopSleeps++;
  }
  return tally;
}

/**
 * Attaches `strace -f` to `pid`, tracing `syscalls` into `file` call by call; resolves once
 * strace has attached (or after 5 s). `stop()` detaches and resolves the tally (tallyTrace),
 * or undefined when strace wrote nothing. Costs the traced process what `strace -c` does (a stop
 * per traced call); the lines cost strace.
 */
export async function traceCalls(
  pid: number,
  file: string,
  syscalls: readonly string[],
): Promise<{ stop(): Promise<SyscallTally | undefined> }> {
  const epolls = syscalls.filter((s) => s.startsWith('epoll_'));
  const raw = epolls.length ? ['-e', `raw=${epolls.join(',')}`] : [];
  const { child, exited, err } = await attach(pid, ['-f', '-e', `trace=${syscalls.join(',')}`, ...raw, '-o', file]);
  return {
    async stop() {
      child.kill('SIGINT');
      await exited;
      try {
        return tallyTrace(readFileSync(file, 'utf8'), pid);
      } catch {
        console.error(`strace on ${pid} wrote nothing (${err().trim().slice(0, 200)})`);
        return undefined;
      }
    },
  };
}
