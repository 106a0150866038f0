// CPU time from Linux's /proc (USER_HZ is 100: 10 ms ticks), for the load tests' per-call and
// per-accept figures.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

/** utime and stime of a /proc …/stat line, in µs. */
function statCpuUs(stat: string): { user: number; system: number } {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]) * (1e6 / 100), system: Number(f[12]) * (1e6 / 100) };
}

/** A process's user and system CPU (all its threads), µs. */
export function processCpuUs(pid: number | 'self'): { user: number; system: number } {
  return statCpuUs(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}

/**
 * This process's main (JavaScript) thread's CPU time, ms: the rest of its CPU is V8's helper
 * threads (garbage collection, compilation) and libuv's pool. Undefined without /proc.
 */
export async function mainThreadCpuMs(): Promise<number | undefined> {
  try {
    const c = statCpuUs(await readFile(`/proc/self/task/${process.pid}/stat`, 'utf8'));
    return (c.user + c.system) / 1000;
  } catch {
    return undefined;
  }
}
