import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { cpuLimit } from '../../loadtest/lib/cpu-limit.ts';
import { processCpuTimeUs } from '../../loadtest/lib/proc-cpu.ts';

// The relay-overhead rounds at a CPU limit (docs/decisions/0248) read calls/s with the server
// under a CFS quota. A machine without a writable cgroup hierarchy (not root) cannot make one:
// the scenario then says so and leaves the check undecided, and this test has nothing to test.
const probe = cpuLimit(0.2);
const available = 'confine' in probe;
if (available) probe.remove();

const groupOf = (pid: number) => readFileSync(`/proc/${pid}/cgroup`, 'utf8');

describe('cpuLimit', () => {
  it.skipIf(!available)('holds a busy process to its quota, then puts it back where it was', async () => {
    const limit = cpuLimit(0.2);
    if (!('confine' in limit)) throw new Error(limit.unavailable);
    const child = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
    try {
      await sleep(200);
      const pid = child.pid!;
      const before = groupOf(pid);
      limit.confine([pid]);
      expect(groupOf(pid)).toContain(`phonebridge-loadtest-${process.pid}`);
      const t0 = limit.throttling();
      const cpu0 = processCpuTimeUs(pid);
      const started = performance.now();
      await sleep(1000);
      const cores = (processCpuTimeUs(pid) - cpu0) / ((performance.now() - started) * 1000);
      const t1 = limit.throttling();
      // A hard cap: at most 0.2 core per 100 ms period (one period's slack for the edges),
      // however idle the machine; a loaded machine may give it less.
      expect(cores).toBeLessThan(0.3);
      expect(t1.periods).toBeGreaterThan(t0.periods);
      limit.release([pid]);
      expect(groupOf(pid)).toBe(before);
    } finally {
      child.kill('SIGKILL');
      limit.remove();
    }
    expect(existsSync(limit.dir)).toBe(false);
  });
});
