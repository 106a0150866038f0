// Expiry on time: entries go when their deadline passes, with no further write, earliest first,
// and a sweep visits what expired rather than every entry.
import { describe, expect, it } from 'vitest';
import { ExpiringMap } from './expiring-map.ts';
import { LocalBus } from './local/index.ts';
import { localBusDropped } from '../metrics.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('ExpiringMap', () => {
  it('removes expired entries on its own timer, without another write', async () => {
    const gone: string[] = [];
    const m = new ExpiringMap<number>((k) => gone.push(k));
    m.set('a', 1, 60);
    m.set('b', 2, 120);
    m.set('keep', 3, 60_000);
    await sleep(250);
    expect(m.size).toBe(1);
    expect(gone).toEqual(['a', 'b']); // in deadline order
    m.close();
  });

  it('an entry due in weeks arms a timer setTimeout can take (no 1 ms re-arming)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const spins = { n: 0 };
    const m = new ExpiringMap<number>();
    const expire = m.expire.bind(m);
    m.expire = (now?: number) => (spins.n++, expire(now));
    try {
      m.set('block-counter', 1, 30 * 24 * 3600_000);
      await sleep(200);
      expect(warnings).not.toContain('TimeoutOverflowWarning');
      expect(spins.n).toBe(0);
      expect(m.get('block-counter')).toBe(1);
    } finally {
      process.off('warning', onWarning);
      m.close();
    }
  });

  it('a renewed entry lives on; renewals do not grow the deadline queue', async () => {
    const m = new ExpiringMap<number>();
    for (let i = 0; i < 5000; i++) m.set('s', i, 1000);
    expect(m.queued).toBe(1);
    await sleep(500);
    m.set('s', 9, 1000); // renewed before its first deadline
    // Past the first deadline, half a second before the renewed one (room for a stalled machine).
    await sleep(550);
    expect(m.get('s')).toBe(9);
    await sleep(1000);
    expect(m.size).toBe(0);
    m.close();
  });

  it("renew moves a live entry's deadline in place, and treats a missing or expired one as get does", () => {
    const gone: string[] = [];
    const m = new ExpiringMap<number>((k) => gone.push(k));
    const t0 = Date.now();
    m.set('s', 1, 1000, t0);
    for (let i = 1; i <= 100; i++) expect(m.renew('s', 1000, t0 + 5 * i)).toBe(1);
    expect(m.queued).toBe(1); // later deadlines are found when the first comes up
    expect(m.expire(t0 + 1200)).toBe(0); // renewed to t0 + 1500
    expect(m.get('s', t0 + 1400)).toBe(1);
    expect(m.renew('missing', 1000, t0)).toBeUndefined();
    expect(m.size).toBe(1);
    expect(m.renew('s', 1000, t0 + 1500)).toBeUndefined(); // due at t0 + 1500: expired
    expect({ size: m.size, gone }).toEqual({ size: 0, gone: ['s'] });
    // A shorter time to live queues the earlier deadline.
    m.set('t', 2, 60_000, t0);
    expect(m.renew('t', 100, t0)).toBe(2);
    expect(m.expire(t0 + 200)).toBe(1);
    expect(gone).toEqual(['s', 't']);
    m.close();
  });

  it('deleted entries do not pile up in the queue', () => {
    const m = new ExpiringMap<number>();
    for (let i = 0; i < 20_000; i++) {
      m.set(`k${i}`, i, 3_600_000);
      m.delete(`k${i}`);
    }
    expect(m.size).toBe(0);
    expect(m.queued).toBeLessThanOrEqual(1024 + 1);
    m.close();
  });

  it('a sweep visits the expired entries, not the live ones', () => {
    let visited = 0;
    const m = new ExpiringMap<number>(() => visited++);
    const now = Date.now();
    for (let i = 0; i < 50_000; i++) m.set(`live${i}`, i, 3_600_000, now);
    for (let i = 0; i < 10; i++) m.set(`short${i}`, i, 10, now);
    const t0 = performance.now();
    expect(m.expire(now + 20)).toBe(10);
    const sweepMs = performance.now() - t0;
    // Visiting 50,000 live entries would take far longer than 10 heap pops; compare to a full scan.
    const t1 = performance.now();
    let n = 0;
    for (const [, e] of m.values()) if (e.expiresAt <= now + 20) n++;
    const scanMs = performance.now() - t1;
    expect(n).toBe(0);
    expect(visited).toBe(10);
    expect(sweepMs).toBeLessThan(scanMs);
    m.close();
  });
});

describe('LocalBus frees memory on time', () => {
  it('an idle session and its replay buffer go at their TTL with no further traffic', async () => {
    const bus = new LocalBus({ replay: { ttlMs: 60_000 } });
    await bus.sessions.create(
      {
        id: 's1',
        tokenId: 't1',
        deviceId: 'd1',
        accountId: 'a1',
        revision: '2025-11-25',
        scopes: ['devices:read'],
        createdAt: Date.now(),
        lastSeenAt: Date.now(),
      },
      150,
    );
    await bus.appendEvent('s1', 'st', 'x'.repeat(200_000));
    await bus.putNonce('n1', 'd1', 100);
    await bus.hit('rl:x', 100);
    expect(bus.stats()).toMatchObject({ sessions: 1, replayBuffers: 1, nonces: 1, counters: 1 });
    expect(bus.stats().replayBytes).toBeGreaterThan(200_000);
    await sleep(400);
    expect(bus.stats()).toEqual({ sessions: 0, replayBuffers: 0, replayBytes: 0, nonces: 0, counters: 0 });
    await bus.close();
  });

  it('holds at most its bound of nonces and windows, forgetting the oldest first, and counts what it forgot', async () => {
    const bus = new LocalBus({ bounds: { nonces: 3, windows: 2 } });
    const dropped = () => ({ nonce: localBusDropped.nonce.value, window: localBusDropped.window.value });
    const before = dropped();
    for (const n of ['n1', 'n2', 'n3', 'n4', 'n5']) await bus.putNonce(n, `dev-${n}`, 60_000);
    expect(bus.stats().nonces).toBe(3);
    expect(await bus.takeNonce('n1')).toBeUndefined();
    expect(await bus.takeNonce('n2')).toBeUndefined();
    expect(await bus.takeNonce('n5')).toBe('dev-n5');
    // A window's later hits take no room; a new one forgets the oldest.
    expect(await bus.hit('rl:a', 60_000)).toBe(1);
    expect(await bus.hit('rl:a', 60_000)).toBe(2);
    expect(await bus.hit('rl:b', 60_000)).toBe(1);
    expect(bus.stats().counters).toBe(2);
    await bus.mark('mark:c', 60_000);
    expect(bus.stats().counters).toBe(2);
    expect(await bus.peek('rl:a')).toBe(0);
    expect(await bus.peek('rl:b')).toBe(1);
    expect(dropped()).toEqual({ nonce: before.nonce + 2, window: before.window + 1 });
    await bus.close();
  });

  it('events for a session that no longer exists are not kept (nothing could resume them)', async () => {
    const bus = new LocalBus();
    // And no id: the session's numbers are gone with it (docs/PROTOCOL.md, "Event ids").
    expect(await bus.appendEvent('gone', 'st', 'x'.repeat(10_000))).toBeUndefined();
    expect(await bus.appendEvent('gone', 'st', 'y')).toBeUndefined();
    expect(bus.stats()).toMatchObject({ replayBuffers: 0, replayBytes: 0 });
    await bus.close();
  });
});
