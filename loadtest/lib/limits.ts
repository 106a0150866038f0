// Limits of this host that bound how many sockets one process can hold.
import { readFileSync } from 'node:fs';

/** RLIMIT_NOFILE of a process (this one by default; children inherit it), or undefined off Linux. */
export function openFileLimits(pid: number | 'self' = 'self'): { soft: number; hard: number } | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const [soft, hard] = (line?.split(/\s+/) ?? []).slice(3, 5).map((v) => (v === 'unlimited' ? Infinity : Number(v)));
    return Number.isFinite(soft) || soft === Infinity ? { soft, hard } : undefined;
  } catch {
    return undefined;
  }
}

/** The soft RLIMIT_NOFILE of this process (children inherit it), or undefined off Linux. */
export function openFileLimit(): number | undefined {
  return openFileLimits()?.soft;
}
