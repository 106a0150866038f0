// `node --import tsx loadtest/wake-spans.ts FILE.data NAME=PID…`: how long each process of a
// call's path is awake for it, from a `perf record` of system-call and scheduler tracepoints:
//
//   perf record -p PIDS -o FILE.data -e 'syscalls:sys_enter_sendto,syscalls:sys_enter_write,
//     syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,
//     syscalls:sys_enter_epoll_wait,syscalls:sys_exit_epoll_wait,syscalls:sys_enter_epoll_pwait,
//     syscalls:sys_exit_epoll_pwait,sched:sched_wakeup,sched:sched_switch' -- sleep 2
//
// The scheduler's events are for reading the timeline by hand (`perf script`: whom a write woke,
// whether the writer was preempted for it); the spans below use the system calls alone.
// A wake starts when an epoll wait returns events and ends at the next wait with a timeout
// (libuv polls once without one first when it measures idle time, as Node has it do). Wakes
// are grouped by their first read's fd and first write's fd (a node woken by a client's POST
// that writes to Redis, woken by Redis that writes to the phone, …); per group, the median
// time from the wake to that first write (the process's part of a call's latency) and to the
// wake's end (with the time it was preempted). docs/BENCHMARKS.md, "Where a cross-node call
// waits".
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';

export interface TraceEvent {
  /** µs */
  t: number;
  pid: number;
  tid: number;
  /** `enter_read`, `exit_epoll_pwait`, `wakeup`, … */
  event: string;
  /** The fd of a read or write, the returned count of an epoll exit, else -1. */
  value: number;
  /** An epoll enter with no timeout (a poll that cannot block). */
  noTimeout: boolean;
}

/** Events of `perf script -F pid,tid,time,event,trace` output. */
export function parseTrace(text: string): TraceEvent[] {
  const out: TraceEvent[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+)\/(\d+)\s+([\d.]+):\s+(?:syscalls:sys_|sched:sched_)(\w+):\s*(.*)$/.exec(line);
    if (!m) continue;
    const [, pid, tid, time, event, rest] = m;
    let value = -1;
    const fd = /fd: 0x([0-9a-f]+)/.exec(rest);
    if (fd) value = parseInt(fd[1], 16);
    else if (event.startsWith('exit_epoll')) value = parseInt(rest.trim(), 16);
    out.push({
      t: Number(time) * 1e6,
      pid: Number(pid),
      tid: Number(tid),
      event,
      value,
      noTimeout: /timeout: 0x0+,/.test(rest),
    });
  }
  return out;
}

export interface WakeGroup {
  /** `NAME in:read20 out:sendto30` */
  key: string;
  wakes: number;
  /** Median µs from the wake to its first write. */
  toFirstWrite: number;
  /** Median µs from the wake to the wait that ends it. */
  awake: number;
}

const READS = new Set(['enter_read', 'enter_recvfrom']);
const WRITES = new Set(['enter_write', 'enter_writev', 'enter_sendto']);

const median = (xs: number[]) => {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

/** Each named process's wakes (its main thread's), grouped as above; groups under `minWakes` left out. */
export function wakeSpans(events: TraceEvent[], names: Map<number, string>, minWakes = 50): WakeGroup[] {
  const groups = new Map<string, Array<{ toFirstWrite: number; awake: number }>>();
  const open = new Map<number, { start: number; firstIn?: string; firstOut?: string; outAt?: number }>();
  for (const e of events) {
    const name = names.get(e.pid);
    if (name === undefined || e.tid !== e.pid) continue;
    const w = open.get(e.pid);
    if (e.event.startsWith('exit_epoll')) {
      if (!w && e.value > 0) open.set(e.pid, { start: e.t });
      continue;
    }
    if (!w) continue;
    const op = e.event.slice('enter_'.length);
    if (READS.has(e.event)) w.firstIn ??= `${op}${e.value}`;
    else if (WRITES.has(e.event) && w.firstOut === undefined) {
      w.firstOut = `${op}${e.value}`;
      w.outAt = e.t - w.start;
    } else if (e.event.startsWith('enter_epoll') && !e.noTimeout) {
      const key = `${name} in:${w.firstIn ?? '-'} out:${w.firstOut ?? '-'}`;
      let g = groups.get(key);
      if (!g) groups.set(key, (g = []));
      g.push({ toFirstWrite: w.outAt ?? NaN, awake: e.t - w.start });
      open.delete(e.pid);
    }
  }
  return [...groups.entries()]
    .filter(([, g]) => g.length >= minWakes)
    .map(([key, g]) => ({
      key,
      wakes: g.length,
      toFirstWrite: median(g.map((x) => x.toFirstWrite)),
      awake: median(g.map((x) => x.awake)),
    }))
    .sort((a, b) => a.key.localeCompare(b.key));
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const { positionals } = parseArgs({ allowPositionals: true });
  const [file, ...named] = positionals;
  const names = new Map<number, string>();
  for (const n of named) {
    const [name, pid] = n.split('=');
    names.set(Number(pid), name);
  }
  const r = spawnSync('perf', ['script', '-i', file, '-F', 'pid,tid,time,event,trace'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  if (r.status !== 0) {
    console.error(`perf script -i ${file} failed: ${r.stderr.trim().split('\n').pop()}`);
    process.exit(1);
  }
  for (const g of wakeSpans(parseTrace(r.stdout), names))
    console.log(
      `${g.key.padEnd(34)} wakes ${String(g.wakes).padStart(5)}  to first write ${g.toFirstWrite.toFixed(0).padStart(4)} µs  awake ${g.awake.toFixed(0).padStart(4)} µs`,
    );
}
