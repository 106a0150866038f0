// Limits of this host that bound how many sockets one process can hold.
import { readFileSync } from 'node:fs';

/** The soft RLIMIT_NOFILE of this process (children inherit it), or undefined off Linux. */
export function openFileLimit(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const n = Number(line?.split(/\s+/)[3]);
    return Number.isFinite(n) ? n : undefined;
  } catch {
    return undefined;
  }
}
