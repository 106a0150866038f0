// `node --import tsx loadtest/perf-profile.ts FILE.data [--calls N] [--top N] [--by function|file]`:
// where a process's CPU goes, from `perf record -e cpu-clock -g -p PID -o FILE.data` of a
// server started with `--perf-basic-prof` (XNODE_ARGS for cross-node-ab,
// PHONEBRIDGE_LOADTEST_RELAY_NODE_ARGS for relay-overhead). Each sample goes to the first
// JavaScript function on its stack from the leaf, so a syscall, the collector or a native
// callee counts for the JS that called it; a sample with no JS on its stack is named by the
// syscall it is in (`[kernel] writev`), or its native leaf. With --calls, µs per call.
//
// Why perf beside `node --cpu-prof` (loadtest/cpu-profile.ts): V8's sampler counts wall time,
// so a thread descheduled inside a syscall (on a loaded two-core machine the process it has just
// woken takes the core) reads as time in that syscall. `cpu-clock` samples only while the
// thread runs, in the kernel too, and every thread (the collector's helpers) as well. On one
// profiled closed-loop cross-node round the origin's writes to Redis were 45 % of V8's busy
// samples and 8 % of perf's (docs/BENCHMARKS.md, "On-CPU profiles with perf").
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';

export interface PerfSample {
  tid: number;
  /** On-CPU time it stands for, ns (cpu-clock's period). */
  periodNs: number;
  /** Symbols, leaf first. */
  frames: string[];
}

/** Samples of `perf script -F tid,period,ip,sym` output. */
export function parsePerfScript(text: string): PerfSample[] {
  const out: PerfSample[] = [];
  let cur: PerfSample | undefined;
  for (const line of text.split('\n')) {
    if (line.trim() === '') {
      cur = undefined;
      continue;
    }
    // A sample's first line (its tid right-aligned, so perhaps indented by spaces), then its
    // frames, each indented by a tab.
    if (line[0] !== '\t') {
      const [tid, period] = line.trim().split(/\s+/);
      cur = { tid: Number(tid), periodNs: Number(period), frames: [] };
      out.push(cur);
      continue;
    }
    if (!cur) continue;
    const t = line.trim();
    const sp = t.indexOf(' ');
    cur.frames.push(sp < 0 ? '[unknown]' : t.slice(sp + 1));
  }
  return out;
}

// libc's syscall wrappers, by the names perf gives them, and what they are.
const SYSCALLS: Array<[RegExp, string]> = [
  [/^(__GI___)?writev$/, 'writev'],
  [/^(__GI___)?(__)?send(to|msg)?$/, 'send'],
  [/^(__GI___)?(__libc_)?recv(from|msg)?$/, 'recv'],
  [/^(__GI___)?(__libc_)?read$/, 'read'],
  [/^(__GI___)?(__libc_)?write$/, 'write'],
  [/^epoll_p?wait$/, 'epoll_wait'],
];

/**
 * What a sample's time counts for: `JS function file` (or `file` with by 'file') of the first
 * JavaScript frame from the leaf, else `[kernel] <syscall>` for a libc syscall wrapper on the
 * stack, else `[native] <leaf>`.
 */
export function attribute(frames: string[], by: 'function' | 'file' = 'function'): string {
  for (const f of frames) {
    if (!f.startsWith('JS:')) continue;
    // `JS:*name file:///path/to/file.ts:1:123` (the `*` or `~` is V8's tier, absent for builtins).
    const m = /^JS:[*~^+]?(\S*) (.+?)(?::\d+)*$/.exec(f);
    if (!m) return f;
    const file = m[2].replace(/^file:\/\//, '').replace(`${process.cwd()}/`, '');
    return by === 'file' ? file : `${m[1] || '(anonymous)'} ${file}`;
  }
  for (const f of frames) for (const [re, name] of SYSCALLS) if (re.test(f)) return `[kernel] ${name}`;
  return `[native] ${frames[0] ?? '[unknown]'}`;
}

export function summarisePerf(
  samples: PerfSample[],
  opts: { by?: 'function' | 'file' } = {},
): { totalNs: number; mainNs: number; rows: Array<{ name: string; ns: number }> } {
  // The main thread is the one with the most samples (the process's pid, which perf script
  // gives as its tid).
  const perTid = new Map<number, number>();
  for (const s of samples) perTid.set(s.tid, (perTid.get(s.tid) ?? 0) + s.periodNs);
  const mainTid = [...perTid.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  const rows = new Map<string, number>();
  let total = 0;
  for (const s of samples) {
    total += s.periodNs;
    const name = s.tid === mainTid ? attribute(s.frames, opts.by) : '[other threads]';
    rows.set(name, (rows.get(name) ?? 0) + s.periodNs);
  }
  return {
    totalNs: total,
    mainNs: mainTid === undefined ? 0 : perTid.get(mainTid)!,
    rows: [...rows.entries()].sort((a, b) => b[1] - a[1]).map(([name, ns]) => ({ name, ns })),
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const { values, positionals } = parseArgs({
    options: {
      calls: { type: 'string' },
      top: { type: 'string', default: '40' },
      by: { type: 'string', default: 'function' },
    },
    allowPositionals: true,
  });
  const by = values.by === 'file' ? 'file' : 'function';
  for (const file of positionals) {
    const r = spawnSync('perf', ['script', '-i', file, '-F', 'tid,period,ip,sym'], {
      encoding: 'utf8',
      maxBuffer: 1 << 30,
    });
    if (r.status !== 0) {
      console.error(`perf script -i ${file} failed: ${r.stderr.trim().split('\n').pop()}`);
      process.exitCode = 1;
      continue;
    }
    const s = summarisePerf(parsePerfScript(r.stdout), { by });
    const calls = values.calls ? Number(values.calls) : undefined;
    const show = (ns: number) =>
      calls ? `${(ns / 1000 / calls).toFixed(2).padStart(8)} µs/call` : `${(ns / 1e6).toFixed(1).padStart(8)} ms`;
    console.log(`${file}: on CPU ${show(s.totalNs)}, main thread ${show(s.mainNs)}`);
    for (const row of s.rows.slice(0, Number(values.top)))
      console.log(
        `${((row.ns / Math.max(1, s.totalNs)) * 100).toFixed(1).padStart(5)} %  ${show(row.ns)}  ${row.name}`,
      );
  }
}
