import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tallyTrace, traceCalls } from '../../loadtest/lib/strace.ts';

// `strace -f -e raw=epoll_wait,epoll_pwait -o FILE` lines, as strace 6.1 writes them of a Node
// process: 100 is the main thread, 101 a helper thread with an epoll loop of its own, 110 a
// thread-pool thread.
const TRACE = [
  '101 epoll_pwait(0x9, 0x7fc092b39cf0, 0x400, 0xffffffff, 0, 0x8 <unfinished ...>',
  // An iteration that slept: the wait without a timeout finds nothing, the one with it blocks.
  '100 epoll_pwait(0xe, 0x7ffd1c087e50, 0x400, 0, 0, 0x8) = 0',
  '100 epoll_pwait(0xe, 0x7ffd1c087e50, 0x400, 0x64, 0, 0x8 <unfinished ...>',
  '110 write(17, "\\1\\0\\0\\0\\0\\0\\0\\0", 8)  = 8',
  '100 <... epoll_pwait resumed>)        = 0x1',
  '100 read(17, "\\1\\0\\0\\0\\0\\0\\0\\0", 1024) = 8',
  // An iteration whose first wait found events: one wait.
  '100 epoll_pwait(0xe, 0x7ffd1c087e50, 0x400, 0, 0, 0x8) = 0x2',
  '100 sendto(23, "HTTP/1.1 200 OK\\r\\n"..., 310, 0, NULL, 0) = 310',
  '100 writev(25, [{iov_base="*3\\r\\n", iov_len=4}], 1) = 4',
  // A sleep the timeout ended: libuv waits on for the rest, in the same iteration.
  '100 epoll_pwait(0xe, 0x7ffd1c087e50, 0x400, 0, 0, 0x8) = 0',
  '100 epoll_pwait(0xe, 0x7ffd1c087e50, 0x400, 0xc8, 0, 0x8) = 0',
  '100 epoll_pwait(0xe, 0x7ffd1c087e50, 0x400, 0x3, 0, 0x8) = 0x1',
  '100 +++ exited with 0 +++',
  '',
].join('\n');

describe('tallyTrace', () => {
  it('counts every thread’s calls, and the main thread’s iterations by their waits without a timeout', () => {
    const t = tallyTrace(TRACE, 100);
    expect(t.calls).toEqual({ epoll_pwait: 7, write: 1, read: 1, sendto: 1, writev: 1 });
    expect(t.loopIterations).toBe(3);
    expect(t.loopSleeps).toBe(3);
  });

  it('reads another thread as the main one only when told', () => {
    const t = tallyTrace(TRACE, 101);
    expect(t.loopIterations).toBe(0);
    expect(t.loopSleeps).toBe(1);
  });
});

const haveStrace = spawnSync('strace', ['-V']).status === 0;

describe.skipIf(!haveStrace)('traceCalls on a real Node process', () => {
  it('reads an idle timer loop as one iteration and one sleep per tick, two epoll waits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pb-strace-test-'));
    // 20 ticks a second; nothing else wakes this loop.
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 50); process.stdout.write("up\\n")'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await new Promise((r) => child.stdout.once('data', r));
      const tracer = await traceCalls(child.pid!, join(dir, 't'), ['epoll_wait', 'epoll_pwait']);
      await new Promise((r) => setTimeout(r, 1000));
      const t = (await tracer.stop())!;
      const waits = t.calls.epoll_pwait ?? t.calls.epoll_wait;
      // About 20 ticks in the second; the machine may delay a few.
      expect(t.loopIterations).toBeGreaterThanOrEqual(10);
      expect(t.loopIterations).toBeLessThanOrEqual(30);
      expect(Math.abs(t.loopSleeps - t.loopIterations)).toBeLessThanOrEqual(2);
      expect(Math.abs(waits - 2 * t.loopIterations)).toBeLessThanOrEqual(3);
    } finally {
      child.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
