import { describe, expect, it } from 'vitest';
import { SimPhone } from '../sim/model.ts';
import { callerOf, connect, err, ok } from './in-memory.ts';

async function setup() {
  const phone = new SimPhone({ now: () => 7_000 });
  const client = await connect({ phone, deviceId: 'phone-1' });
  return { phone, call: callerOf(client) };
}

describe('wait_for_events', () => {
  it('returns pending events since the cursor at once', async () => {
    const { phone, call } = await setup();
    phone.openApp('com.android.settings');
    const result = ok(await call('wait_for_events', { cursor: 0, timeout_s: 600 }));
    expect(result).toEqual({
      events: [
        { seq: 1, type: 'app_changed', at: 7_000, app: 'com.android.settings', previousApp: 'com.android.launcher' },
        {
          seq: 2,
          type: 'screen_changed',
          at: 7_000,
          app: 'com.android.settings',
          screen: 'settings',
          title: 'Settings',
        },
      ],
      cursor: 2,
      timedOut: false,
      more: false,
    });
    expect(
      ok(await call('wait_for_events', { cursor: 0, timeout_s: 0, types: ['screen_changed'] })).events.map(
        (e: { seq: number }) => e.seq,
      ),
    ).toEqual([2]);
  });

  it('returns an injected notification within its timeout', async () => {
    const { phone, call } = await setup();
    const started = Date.now();
    const waiting = call('wait_for_events', { timeout_s: 10, types: ['notification'] });
    setTimeout(() => {
      phone.openApp('com.android.settings'); // filtered out by types
      phone.injectNotification({ app: 'com.android.messaging', title: 'Ada', text: 'Lunch?' });
    }, 50);
    const result = ok(await waiting);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result).toEqual({
      events: [{ seq: 3, type: 'notification', at: 7_000, app: 'com.android.messaging', title: 'Ada', text: 'Lunch?' }],
      cursor: 3,
      timedOut: false,
      more: false,
    });
  });

  it('returns empty at the timeout', async () => {
    const { phone, call } = await setup();
    const started = Date.now();
    expect(ok(await call('wait_for_events', { timeout_s: 1 }))).toEqual({
      events: [],
      cursor: 0,
      timedOut: true,
      more: false,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(990);
    // Fractions of a second, as the surface published timeout_s (docs/decisions/0184-timeout-s-stays-a-number.md).
    const half = Date.now();
    expect(ok(await call('wait_for_events', { timeout_s: 0.5 })).timedOut).toBe(true);
    expect(Date.now() - half).toBeGreaterThanOrEqual(490);
    expect(err(await call('wait_for_events', { timeout_s: -0.5 })).code).toBe('invalid_arguments');
    expect(ok(await call('wait_for_events', { cursor: 0, timeout_s: 0 })).timedOut).toBe(true);
    expect(phone.listenerCount).toBe(0);
  });

  it('takes the wait as timeout_ms, whole milliseconds, and refuses both units at once (decision 0212)', async () => {
    const { phone, call } = await setup();
    const started = Date.now();
    expect(ok(await call('wait_for_events', { timeout_ms: 400 }))).toMatchObject({ events: [], timedOut: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
    expect(ok(await call('wait_for_events', { cursor: 0, timeout_ms: 0 })).timedOut).toBe(true);
    const both = err(await call('wait_for_events', { timeout_s: 1, timeout_ms: 1000 }));
    expect(both).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('timeout_s or timeout_ms'),
    });
    for (const bad of [1.5, -1, 600_001, '100'])
      expect(err(await call('wait_for_events', { timeout_ms: bad })).code).toBe('invalid_arguments');
    expect(phone.listenerCount).toBe(0);
  });

  it('stops waiting when the request is cancelled', async () => {
    const { phone, call } = await setup();
    const controller = new AbortController();
    const waiting = call('wait_for_events', { timeout_s: 600 }, { signal: controller.signal });
    await new Promise((r) => setTimeout(r, 50));
    expect(phone.listenerCount).toBe(1);
    controller.abort('enough');
    await expect(waiting).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 20)); // the cancellation notification reaches the server
    expect(phone.listenerCount).toBe(0);
    expect(ok(await call('list_devices')).devices).toHaveLength(1);
  });

  it('caps one result and says there is more', async () => {
    const { phone, call } = await setup();
    for (let i = 0; i < 130; i++) phone.injectNotification({ app: 'notes', title: `n${i}`, text: '' });
    const first = ok(await call('wait_for_events', { cursor: 0, timeout_s: 0 }));
    expect(first).toMatchObject({ cursor: 100, more: true });
    expect(first.events).toHaveLength(100);
    const rest = ok(await call('wait_for_events', { cursor: first.cursor, timeout_s: 0 }));
    expect(rest).toMatchObject({ cursor: 130, more: false });
    expect(err(await call('wait_for_events', { timeout_s: -1 })).code).toBe('invalid_arguments');
  });

  it('batches by size too: events too big for one result together come over several, none lost', async () => {
    const { phone, call } = await setup();
    // 3000 control characters escape to 18 KB of JSON, counted twice in a result: 100 of them
    // are ten times one message.
    for (let i = 0; i < 100; i++)
      phone.injectNotification({ app: 'notes', title: `n${i}`, text: '\u0001'.repeat(3000) });
    const seen: string[] = [];
    let cursor = 0;
    let calls = 0;
    for (let more = true; more; calls++) {
      const r = ok(await call('wait_for_events', { cursor, timeout_s: 0 }));
      expect(r.events.length).toBeGreaterThan(0);
      seen.push(...r.events.map((e: { title: string }) => e.title));
      ({ cursor, more } = r);
    }
    expect(seen).toEqual(Array.from({ length: 100 }, (_, i) => `n${i}`));
    expect(calls).toBeGreaterThan(1);
  });

  it('keeps a notification as Android does (5 KiB of title and text), so even one huge one is delivered', async () => {
    const { phone, call } = await setup();
    phone.injectNotification({ app: 'notes', title: '\u0001'.repeat(50_000), text: '\u0001'.repeat(50_000) });
    const r = ok(await call('wait_for_events', { cursor: 0, timeout_s: 0 }));
    expect(r.events).toHaveLength(1);
    expect(r.events[0].title).toHaveLength(5 * 1024);
    expect(r.events[0].text).toHaveLength(5 * 1024);
  });

  it('a cursor from before the phone restarted (ahead of its log) gets every event since', async () => {
    const { phone, call } = await setup(); // a fresh phone: its cursor starts at 0 again
    phone.injectNotification({ app: 'notes', title: 'after restart', text: '' });
    const result = ok(await call('wait_for_events', { cursor: 57, timeout_s: 0 }));
    expect(result).toMatchObject({ cursor: 1, timedOut: false, more: false });
    expect(result.events.map((e: { title: string }) => e.title)).toEqual(['after restart']);
  });
});
