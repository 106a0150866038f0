// `strace -c -f` attached to a running process, for syscall counts in the load tests
// (relay-overhead's sends and epoll waits per call, storm's syscalls per accept).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

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
  const child = spawn('strace', ['-c', '-f', ...filter, '-o', file, '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
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
        console.error(`strace on ${pid} gave no summary (${err.trim().slice(0, 200)})`);
        return undefined;
      }
    },
  };
}
