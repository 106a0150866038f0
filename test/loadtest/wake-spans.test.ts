import { describe, expect, it } from 'vitest';
import { parseTrace, wakeSpans } from '../../loadtest/wake-spans.ts';

// `perf script -F pid,tid,time,event,trace` lines, as perf prints them.
const line = (pid: number, t: number, event: string, rest: string, tid = pid) =>
  `${String(pid).padStart(5)}/${tid}   ${t.toFixed(6)}:   ${event}: ${rest}`;
const exitWait = (pid: number, t: number, n: number) => line(pid, t, 'syscalls:sys_exit_epoll_pwait', `0x${n}`);
const wait = (pid: number, t: number, timeout: number) =>
  line(
    pid,
    t,
    'syscalls:sys_enter_epoll_pwait',
    `epfd: 0x0000000e, events: 0x7ff, maxevents: 0x00000400, timeout: 0x${timeout.toString(16).padStart(8, '0')}, sigmask: 0x0`,
  );
const io = (pid: number, t: number, call: string, fd: number) =>
  line(pid, t, `syscalls:sys_enter_${call}`, `fd: 0x${fd.toString(16).padStart(8, '0')}, buf: 0x1, count: 0x10`);

describe('wake-spans', () => {
  it('reads a wake from an epoll return with events to the next wait that can block', () => {
    const A = 100;
    const lines: string[] = [];
    for (let k = 0; k < 3; k++) {
      const t0 = 1 + k * 0.001;
      lines.push(
        exitWait(A, t0, 1),
        io(A, t0 + 0.000002, 'recvfrom', 30),
        io(A, t0 + 0.00004 + k * 0.000001, 'write', 27),
        wait(A, t0 + 0.00005, 0), // libuv's poll without a timeout: not the end
        exitWait(A, t0 + 0.000051, 0),
        wait(A, t0 + 0.00006 + k * 0.000002, 8),
        line(A + 1, t0 + 0.00007, 'sched:sched_wakeup', 'comm=node pid=100 prio=120 target_cpu=001'),
      );
      // A helper thread's reads count for nothing.
      lines.push(io(A, t0 + 0.00001, 'read', 5).replace(`${A}/${A}`, `${A}/${A + 7}`));
    }
    // A poll returning nothing starts no wake; a wake with no write has none to time.
    lines.push(exitWait(A, 2, 0), io(A, 2.000001, 'read', 20), wait(A, 2.000002, 8));
    lines.push(exitWait(A, 3, 2), io(A, 3.000001, 'read', 20), wait(A, 3.000009, 8));
    const events = parseTrace(lines.join('\n'));
    expect(events.filter((e) => e.event === 'wakeup')).toHaveLength(3);
    const groups = wakeSpans(events, new Map([[A, 'A']]), 1);
    expect(groups.map((g) => g.key)).toEqual(['A in:read20 out:-', 'A in:recvfrom30 out:write27']);
    const [noWrite, calls] = groups;
    expect(noWrite.wakes).toBe(1);
    expect(noWrite.toFirstWrite).toBeNaN();
    expect(noWrite.awake).toBeCloseTo(9, 0);
    expect(calls.wakes).toBe(3);
    expect(calls.toFirstWrite).toBeCloseTo(41, 0);
    expect(calls.awake).toBeCloseTo(62, 0);
    // Groups under the least number of wakes are left out.
    expect(wakeSpans(events, new Map([[A, 'A']]), 2).map((g) => g.key)).toEqual(['A in:recvfrom30 out:write27']);
  });
});
