// Exclusive "I have PGlite open on this directory" lock. PGlite is one Postgres backend in one
// process; two processes opening the same pgdata corrupt it, so whoever opens it (serve or a CLI
// command without a running serve) first creates this file with O_EXCL.
import process from 'node:process';
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';

export interface LockInfo {
  pid: number;
  role: 'serve' | 'cli';
  startedAt: string;
}

export class DataDirBusyError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: LockInfo,
    reason: string,
  ) {
    super(reason);
    this.name = 'DataDirBusyError';
  }
}

// Locks this process holds, by path: a lock file naming our own pid that is not in here was
// left by an earlier process that had the same pid (common in containers, where pids restart at 1).
const heldHere = new Set<string>();

export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function readLock(path: string): LockInfo | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const v = JSON.parse(text) as Partial<LockInfo>;
    if (typeof v.pid === 'number') {
      return { pid: v.pid, role: v.role === 'serve' ? 'serve' : 'cli', startedAt: String(v.startedAt ?? '') };
    }
  } catch {
    // A half-written file (crash between create and write): the writer is gone or about to finish.
  }
  return { pid: 0, role: 'cli', startedAt: '' };
}

function holderAlive(path: string, info: LockInfo): boolean {
  if (info.pid === process.pid) return heldHere.has(path);
  return pidAlive(info.pid);
}

export type LockAttempt = { ok: true; release: () => void } | { ok: false; holder: LockInfo };

/**
 * Takes the lock or reports its live holder, without waiting. A lock whose pid is dead is stale
 * and is removed.
 * Two processes that find the same stale lock at the same instant could both remove it; the
 * window is a few microseconds after a crash, which we accept rather than depend on flock(2)
 * (not exposed by Node).
 */
export function tryLock(path: string, role: LockInfo['role']): LockAttempt {
  let unparseable = 0;
  for (let attempt = 0; attempt < 5; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = readLock(path);
      if (!holder) continue; // released between our open and read
      if (holder.pid === 0) {
        // Unparseable: give a writer that has just created it a moment before calling it stale.
        if (unparseable++ < 2) {
          sleepSync(50);
          continue;
        }
      } else if (holderAlive(path, holder)) {
        return { ok: false, holder };
      }
      // Narrow the window in which we could delete a lock someone else has just taken over.
      const again = readLock(path);
      if (again && (again.pid !== holder.pid || again.startedAt !== holder.startedAt)) continue;
      try {
        unlinkSync(path);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      }
      continue;
    }
    const info: LockInfo = { pid: process.pid, role, startedAt: new Date().toISOString() };
    try {
      writeSync(fd, JSON.stringify(info) + '\n');
    } finally {
      closeSync(fd);
    }
    heldHere.add(path);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        heldHere.delete(path);
        // Remove only our own file, never one another process wrote after a stale takeover.
        if (readLock(path)?.pid === process.pid) {
          try {
            unlinkSync(path);
          } catch {
            // already gone
          }
        }
      },
    };
  }
  const holder = readLock(path) ?? { pid: 0, role: 'cli' as const, startedAt: '' };
  return { ok: false, holder };
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
