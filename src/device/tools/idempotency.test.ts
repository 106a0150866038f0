import { describe, expect, it } from 'vitest';
import { SimPhone } from '../sim/model.ts';
import { REPLAYED_META_KEY, type Caller } from './contract.ts';
import { callerOf, connect, err, ok } from './in-memory.ts';

const scopes: Caller['scopes'] = ['devices:read', 'devices:act', 'devices:lease', 'runs:start'];

async function setup(limits: { idempotencyTtlMs?: number; idempotencyMaxEntries?: number } = {}) {
  const clock = { t: 1_000 };
  const phone = new SimPhone({ now: () => clock.t });
  const client = await connect({ phone, deviceId: 'phone-1', now: () => clock.t, runStepDelayMs: 1, ...limits });
  return {
    phone,
    clock,
    alice: callerOf(client, { credential: 'tok-alice', scopes }),
    bob: callerOf(client, { credential: 'tok-bob', scopes }),
  };
}

describe('idempotency keys', () => {
  it('the same key twice acts once and returns the same outcome', async () => {
    const { phone, clock, alice } = await setup();
    ok(await alice('open_app', { packageName: 'com.phonebridge.notes' }));
    const first = await alice('type_text', { text: 'abc', elementId: 'notes.body', idempotencyKey: 'type-1' });
    clock.t += 5_000;
    const retry = await alice('type_text', { text: 'abc', elementId: 'notes.body', idempotencyKey: 'type-1' });
    expect(phone.snapshot().note).toBe('abc');
    expect(retry.structuredContent).toEqual(first.structuredContent);
    expect(retry.content[0]).toEqual(first.content[0]);
    expect(retry._meta?.[REPLAYED_META_KEY]).toBe(true);
    expect(first._meta?.[REPLAYED_META_KEY]).toBeUndefined();
  });

  it("get_outcome finds a recorded outcome, and only the caller's own", async () => {
    const { alice, bob } = await setup();
    const done = ok(await alice('open_app', { packageName: 'com.phonebridge.notes', idempotencyKey: 'open-notes' }));
    expect(ok(await alice('get_outcome', { idempotencyKey: 'open-notes' }))).toEqual({
      idempotencyKey: 'open-notes',
      found: true,
      tool: 'open_app',
      recordedAt: 1_000,
      result: done,
    });
    expect(ok(await bob('get_outcome', { idempotencyKey: 'open-notes' }))).toMatchObject({
      found: false,
      result: null,
    });
  });

  it('another credential with the same key does not collide', async () => {
    const { phone, alice, bob } = await setup();
    ok(await alice('open_app', { packageName: 'com.phonebridge.notes' }));
    ok(await alice('type_text', { text: 'a', elementId: 'notes.body', idempotencyKey: 'same' }));
    ok(await alice('release_device', { leaseId: 'lease-1' }));
    const bobs = await bob('type_text', { text: 'a', elementId: 'notes.body', idempotencyKey: 'same' });
    expect(bobs._meta?.[REPLAYED_META_KEY]).toBeUndefined();
    expect(ok(bobs).leaseId).toBe('lease-2');
    expect(phone.snapshot().note).toBe('aa');
  });

  it('a key reused for a different call is refused', async () => {
    const { alice } = await setup();
    ok(await alice('press_key', { key: 'HOME', idempotencyKey: 'k' }));
    expect(err(await alice('press_key', { key: 'BACK', idempotencyKey: 'k' }))).toMatchObject({
      code: 'idempotency_key_reused',
    });
    expect(err(await alice('open_app', { packageName: 'com.phonebridge.notes', idempotencyKey: 'k' }))).toMatchObject({
      code: 'idempotency_key_reused',
    });
  });

  it('outcomes are kept for a bounded time and count', async () => {
    const { phone, clock, alice } = await setup({ idempotencyTtlMs: 10_000, idempotencyMaxEntries: 2 });
    ok(await alice('open_app', { packageName: 'com.phonebridge.notes', idempotencyKey: 'k1' }));
    ok(await alice('press_key', { key: 'TAB', idempotencyKey: 'k2' })); // focuses notes.body
    ok(await alice('press_key', { key: 'SPACE', idempotencyKey: 'k3' })); // evicts k1, the least recently used
    expect(ok(await alice('get_outcome', { idempotencyKey: 'k1' })).found).toBe(false);
    expect(ok(await alice('get_outcome', { idempotencyKey: 'k3' })).found).toBe(true);
    clock.t += 10_000;
    expect(ok(await alice('get_outcome', { idempotencyKey: 'k3' })).found).toBe(false);
    ok(await alice('press_key', { key: 'SPACE', idempotencyKey: 'k3' })); // acts again once expired
    expect(phone.snapshot().note).toBe('  ');
  });

  it('start_run honours its key: a retry returns the same run', async () => {
    const { alice } = await setup();
    const run = ok(
      await alice('start_run', { steps: [{ action: 'press_key', key: 'HOME' }], idempotencyKey: 'run-key' }),
    );
    const again = ok(
      await alice('start_run', { steps: [{ action: 'press_key', key: 'HOME' }], idempotencyKey: 'run-key' }),
    );
    expect(again).toEqual(run);
    expect(ok(await alice('get_outcome', { idempotencyKey: 'run-key' })).result).toEqual(run);
  });
});
