// A CPU limit on a server process, as a container runtime sets one (Kubernetes' `limits.cpu`:
// the kernel's CFS bandwidth control, a quota of CPU time per period for every thread of the
// processes in a cgroup). docs/decisions/0248-calls-per-second-at-a-cpu-limit.md: throughput is
// read with the server the only process at its limit, so what the load generator and the phone
// cost on the shared cores does not set it.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CpuLimit {
  /** Where the group lives (cgroup v1's `cpu` hierarchy or a v2 group). */
  readonly dir: string;
  /** Cores' worth of CPU time the group may use per period (0.25 = a quarter of one core). */
  readonly cores: number;
  /** Moves every thread of `pids` into the group. */
  confine(pids: number[]): void;
  /** Moves `pids` back to the groups they were in before `confine`. */
  release(pids: number[]): void;
  /** Periods so far, and how many of them the group ran out of quota in. */
  throttling(): { periods: number; throttled: number };
  /** Removes the group (its processes released first). */
  remove(): void;
}

const V1 = '/sys/fs/cgroup/cpu';
const V2 = '/sys/fs/cgroup';

/**
 * A cgroup limiting its processes to `cores` of CPU per `periodUs` (100 ms: the kernel's and
 * Kubernetes' default), or why none can be made here (no write access to a cgroup hierarchy
 * with the cpu controller: not root, or a container without one).
 */
export function cpuLimit(cores: number, periodUs = 100_000): CpuLimit | { unavailable: string } {
  const name = `phonebridge-loadtest-${process.pid}`;
  const quotaUs = Math.max(1000, Math.round(cores * periodUs));
  try {
    if (existsSync(join(V1, 'cpu.cfs_quota_us'))) {
      const dir = join(V1, name);
      mkdirSync(dir);
      writeFileSync(join(dir, 'cpu.cfs_period_us'), String(periodUs));
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
      return group(dir, cores, V1, (pid) => currentGroup(pid, (c) => c.split(',').includes('cpu')));
    }
    if (readFileSync(join(V2, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('cpu')) {
      const dir = join(V2, name);
      mkdirSync(dir);
      writeFileSync(join(dir, 'cpu.max'), `${quotaUs} ${periodUs}`);
      return group(dir, cores, V2, (pid) => currentGroup(pid, (c) => c === ''));
    }
    return { unavailable: 'no cgroup hierarchy with the cpu controller' };
  } catch (err) {
    return { unavailable: `cannot make a cgroup: ${(err as Error).message}` };
  }
}

function group(dir: string, cores: number, hierarchy: string, groupOf: (pid: number) => string): CpuLimit {
  const before = new Map<number, string>();
  // Writing a pid to cgroup.procs moves its whole thread group, threads made later included.
  const moveTo = (group: string, pid: number | string) =>
    writeFileSync(join(hierarchy, group, 'cgroup.procs'), String(pid));
  const back = (pid: number) => {
    moveTo(before.get(pid) ?? '/', pid);
    before.delete(pid);
  };
  return {
    dir,
    cores,
    confine(pids) {
      for (const pid of pids) {
        if (!before.has(pid)) before.set(pid, groupOf(pid));
        writeFileSync(join(dir, 'cgroup.procs'), String(pid));
      }
    },
    release: (pids) => pids.forEach(back),
    // cpu.stat counts nr_periods and nr_throttled in both hierarchies.
    throttling() {
      const s = stat(join(dir, 'cpu.stat'));
      return { periods: s.nr_periods ?? 0, throttled: s.nr_throttled ?? 0 };
    },
    remove() {
      for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) back(Number(pid));
      rmdirSync(dir);
    },
  };
}

/** The group `pid` is in, in the hierarchy whose controller list `matches` (/proc/PID/cgroup). */
function currentGroup(pid: number, matches: (controllers: string) => boolean): string {
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')) {
    const [, controllers, path] = line.split(':');
    if (path !== undefined && matches(controllers)) return path;
  }
  return '/';
}

function stat(file: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [k, v] = line.split(' ');
    if (k) out[k] = Number(v);
  }
  return out;
}
