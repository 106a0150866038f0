// loadtest/perf-profile.ts: `perf script` output read into samples, each sample's time given to
// the first JavaScript function from its leaf, else to its syscall or native leaf.
import { describe, expect, it } from 'vitest';
import { attribute, parsePerfScript, summarisePerf } from '../../loadtest/perf-profile.ts';

const SCRIPT = [
  // The main thread inside a send called from JS: counted for the JS function.
  '100     500000 ',
  '\tffffffff82062cc2 tcp_sendmsg_locked',
  '\t          10aba4 __send',
  '\t    7fd5c214c938 JS:*flushWrites file:///repo/src/gateway/http.ts:1:388',
  '\t    7fd5c2130b89 JS:~post file:///repo/src/gateway/mcp-endpoint.ts:1:4324',
  '',
  // The main thread waiting in epoll, no JS on the stack.
  '100     500000 ',
  '\tffffffff82240c89 pvm_irq_enable',
  '\t          108cae epoll_pwait',
  '\t          1234 uv__io_poll',
  '',
  // A writev reached from native code only.
  '100     250000 ',
  '\t          99 __GI___writev',
  '\t          98 node::LibuvStreamWrap::DoTryWrite',
  '',
  // A native leaf with nothing known above it.
  '100     250000 ',
  '\t          77 _int_malloc',
  '\t          0 [unknown]',
  '',
  // A helper thread (the collector, the compiler); perf right-aligns the tid.
  '  104     500000 ',
  '\t          55 v8::internal::Scavenger::ScavengePage',
  '',
].join('\n');

describe('perf-profile', () => {
  it('reads each sample: its thread, its on-CPU time and its frames leaf first', () => {
    const samples = parsePerfScript(SCRIPT);
    expect(samples.map((s) => [s.tid, s.periodNs, s.frames.length])).toEqual([
      [100, 500000, 4],
      [100, 500000, 3],
      [100, 250000, 2],
      [100, 250000, 2],
      [104, 500000, 1],
    ]);
    expect(samples[0].frames[0]).toBe('tcp_sendmsg_locked');
  });

  it('gives a sample to its first JS frame, else its syscall, else its native leaf', () => {
    const [inJs, inEpoll, inWritev, inMalloc] = parsePerfScript(SCRIPT);
    expect(attribute(inJs.frames)).toBe('flushWrites /repo/src/gateway/http.ts');
    expect(attribute(inJs.frames, 'file')).toBe('/repo/src/gateway/http.ts');
    expect(attribute(inEpoll.frames)).toBe('[kernel] epoll_wait');
    expect(attribute(inWritev.frames)).toBe('[kernel] writev');
    expect(attribute(inMalloc.frames)).toBe('[native] _int_malloc');
    // An anonymous function keeps its place.
    expect(attribute(['JS:* file:///repo/src/gateway/node.ts:1:7330'])).toBe('(anonymous) /repo/src/gateway/node.ts');
  });

  it('sums time per row, the main thread apart from the others', () => {
    const s = summarisePerf(parsePerfScript(SCRIPT));
    expect(s.totalNs).toBe(2_000_000);
    expect(s.mainNs).toBe(1_500_000);
    expect(Object.fromEntries(s.rows.map((r) => [r.name, r.ns]))).toEqual({
      'flushWrites /repo/src/gateway/http.ts': 500_000,
      '[kernel] epoll_wait': 500_000,
      '[other threads]': 500_000,
      '[kernel] writev': 250_000,
      '[native] _int_malloc': 250_000,
    });
  });
});
