// CPU time from Linux's /proc, for the load tests' per-call and per-accept figures. `/proc/PID/stat`
// counts in USER_HZ ticks (10 ms): over a 2 s idle window that is 0.5 % steps, which at 800
// calls/s moved a target's CPU per call by 6 µs a step. `processCpuTimeUs` sums the scheduler's
// nanosecond counts of every thread instead.
import { readdirSync, readFileSync } from 'node:fs';

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
 * A process's CPU time over all its threads, µs, to the nanosecond: the sum of each live
 * thread's `/proc/PID/task/TID/schedstat`. A thread that has exited takes its time out of that
 * sum (its time stays in `/proc/PID/stat`), so the tick count is the least this returns.
 */
export function processCpuTimeUs(pid: number | 'self'): number {
  const c = processCpuUs(pid);
  const ticks = c.user + c.system;
  let ns = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ', 1)[0]);
      } catch {
        // the thread exited between the listing and the read
      }
    }
  } catch {
    return ticks;
  }
  return Math.max(ns / 1000, ticks);
}

/**
 * A process's main (JavaScript) thread's CPU time, µs, to the nanosecond (its schedstat; the
 * main thread's id is the process's): the rest of processCpuTimeUs is V8's helper threads
 * (garbage collection, compilation) and libuv's pool. NaN without /proc.
 */
export function mainThreadCpuTimeUs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'latin1').split(' ', 1)[0]) / 1000;
  } catch {
    return NaN;
  }
}

/** This process's main thread's CPU time (mainThreadCpuTimeUs), ms; undefined without /proc. */
export function mainThreadCpuMs(): number | undefined {
  const us = mainThreadCpuTimeUs(process.pid);
  return Number.isNaN(us) ? undefined : us / 1000;
}
