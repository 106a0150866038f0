import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Pinger, PING_DEFAULTS } from './pinger.ts';

class FakeSocket extends EventEmitter {
  pings: number[] = [];
  terminated = false;
  answer = true;
  ping(): void {
    this.pings.push(Date.now());
    if (this.answer) setTimeout(() => this.emit('pong'), 50); // a relay 50 ms away
  }
  terminate(): void {
    this.terminated = true;
  }
}

beforeEach(() => void vi.useFakeTimers({ now: 0 }));
afterEach(() => void vi.useRealTimers());

const gaps = (times: number[]) => times.map((t, i) => t - (i === 0 ? 0 : times[i - 1] + 50));

describe('Pinger', () => {
  it('defaults to 1 min growing ×1.5 to 10 min', () => {
    expect(PING_DEFAULTS).toEqual({ initialMs: 60_000, maxMs: 600_000, growth: 1.5, pongTimeoutMs: 30_000 });
  });

  it('stretches the interval after each pong in time, up to the ceiling', () => {
    const socket = new FakeSocket();
    const pinger = new Pinger();
    pinger.attach(socket);
    vi.advanceTimersByTime(60 * 60_000);
    expect(gaps(socket.pings).slice(0, 8)).toEqual([
      60_000, 90_000, 135_000, 202_500, 303_750, 455_625, 600_000, 600_000,
    ]);
    expect(pinger.intervalMs).toBe(600_000);
    expect(socket.terminated).toBe(false);
  });

  it('terminates the socket after a missed pong and starts the next socket at 1 min again', () => {
    const missed: number[] = [];
    const pinger = new Pinger({}, (ms) => missed.push(ms));
    const first = new FakeSocket();
    const detach = pinger.attach(first);
    vi.advanceTimersByTime(60_000 + 90_000 + 135_000 + 200); // three pongs in time
    expect(pinger.intervalMs).toBe(202_500);
    first.answer = false;
    vi.advanceTimersByTime(202_500 + 29_000);
    expect(first.terminated).toBe(false); // still inside the pong timeout
    vi.advanceTimersByTime(1_000);
    expect(first.terminated).toBe(true);
    expect(missed).toEqual([30_000]);
    expect(pinger.intervalMs).toBe(60_000);
    detach();

    const second = new FakeSocket();
    pinger.attach(second);
    vi.advanceTimersByTime(59_999);
    expect(second.pings).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(second.pings).toHaveLength(1);
  });

  it('takes its intervals from options and stops when detached', () => {
    const socket = new FakeSocket();
    const pinger = new Pinger({ initialMs: 100, maxMs: 300, growth: 2, pongTimeoutMs: 80 });
    const detach = pinger.attach(socket);
    vi.advanceTimersByTime(100 + 50 + 200 + 50 + 300 + 50);
    expect(gaps(socket.pings)).toEqual([100, 200, 300]);
    detach();
    vi.advanceTimersByTime(10_000);
    expect(socket.pings).toHaveLength(3);
    expect(socket.listenerCount('pong')).toBe(0);
  });
});
