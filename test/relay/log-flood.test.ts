// Lines anyone can cause are bounded: a rejected phone upgrade logs at most 128 characters of
// any header, and at most REJECTED_LOG_LINES lines per window per node (the rest are counted
// into the next line; the metric counts every rejection).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, LogThrottle, logValue, MAX_LOGGED_VALUE } from '../../src/log.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { openSocket } from '../helpers/raw-device.ts';
import { REJECTED_LOG_LINES } from '../../src/gateway/device-socket.ts';

const lines: string[] = [];
let relay: TestRelay;

beforeAll(async () => {
  relay = await startTestRelay([], {
    log: createLogger({ level: 'info', destination: { write: (l) => void lines.push(l) } }),
  });
});
afterAll(async () => {
  await relay?.stop();
});

describe('rejected upgrades', () => {
  it('100 upgrades with a 60 KB X-Device-Id: few, short lines; every socket still closed 4003', async () => {
    const huge = 'd'.repeat(60 * 1024);
    const before = lines.length;
    const codes = await Promise.all(
      Array.from({ length: 100 }, async () => {
        const s = await openSocket(relay.url, {
          'x-device-id': huge,
          'x-device-nonce': 'n',
          'x-device-ts': String(Math.floor(Date.now() / 1000)),
          'x-device-sig': 's',
          'x-device-app': 'a'.repeat(10_000),
        });
        return (await s.closed).code;
      }),
    );
    expect(codes).toEqual(Array(100).fill(4003));
    const rejected = lines.slice(before).filter((l) => l.includes('device socket rejected'));
    expect(rejected.length).toBeGreaterThan(0);
    expect(rejected.length).toBeLessThanOrEqual(REJECTED_LOG_LINES);
    for (const l of rejected) expect(l.length).toBeLessThan(512);
    const logged = lines.slice(before).join('').length;
    expect(logged).toBeLessThan(REJECTED_LOG_LINES * 512 + 4096);
    expect(JSON.parse(rejected[0]).deviceId).toBe(`${'d'.repeat(MAX_LOGGED_VALUE)}…(${60 * 1024} chars)`);
  });
});

describe('LogThrottle and logValue', () => {
  it('lets `limit` lines through per window and reports what it dropped with the next one', () => {
    let t = 0;
    const th = new LogThrottle(2, 1000, () => t);
    expect([th.take(), th.take(), th.take(), th.take()]).toEqual([0, 0, undefined, undefined]);
    t = 999;
    expect(th.take()).toBeUndefined();
    t = 1000;
    expect(th.take()).toBe(3);
    expect(th.take()).toBe(0);
  });

  it('keeps short values and cuts long ones at 128 characters', () => {
    expect(logValue(undefined)).toBeUndefined();
    expect(logValue('dev_abc')).toBe('dev_abc');
    expect(logValue('x'.repeat(128))).toBe('x'.repeat(128));
    expect(logValue('x'.repeat(129))).toBe(`${'x'.repeat(128)}…(129 chars)`);
  });
});
