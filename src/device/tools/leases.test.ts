import { describe, expect, it } from 'vitest';
import { SimPhone } from '../sim/model.ts';
import type { Caller } from './contract.ts';
import { callerOf, connect, err, ok } from './in-memory.ts';

const ALICE: Caller = {
  credential: 'tok-alice',
  scopes: ['devices:read', 'devices:act', 'devices:lease', 'runs:start'],
};
const BOB: Caller = { credential: 'tok-bob', scopes: ['devices:read', 'devices:act', 'devices:lease', 'runs:start'] };
const ACT_ONLY: Caller = { credential: 'tok-act', scopes: ['devices:read', 'devices:act'] };

/** Two connections to one phone (as through the relay), sharing an adjustable clock. */
async function setup() {
  const clock = { t: 1_000_000 };
  const phone = new SimPhone({ now: () => clock.t });
  const opts = { phone, deviceId: 'phone-1', now: () => clock.t, leaseTtlMs: 60_000 };
  const [a, b] = [await connect(opts), await connect(opts)];
  return { phone, clock, alice: callerOf(a, ALICE), bob: callerOf(b, BOB), actOnly: callerOf(b, ACT_ONLY) };
}

describe('leases', () => {
  it('the holder acts; another credential gets lease_required and nothing happens', async () => {
    const { phone, alice, bob } = await setup();
    const lease = ok(await alice('take_device'));
    expect(lease).toMatchObject({
      deviceId: 'phone-1',
      leaseId: 'lease-1',
      expiresAt: 1_060_000,
      ttlS: 60,
      renewed: false,
    });
    expect(ok(await alice('open_app', { packageName: 'com.android.settings' })).leaseId).toBe('lease-1');
    expect(err(await bob('press_key', { key: 'HOME' }))).toMatchObject({ code: 'lease_required', retryAfterS: 60 });
    expect(err(await bob('observe_screen'))).toMatchObject({ code: 'lease_required' });
    expect(err(await bob('take_device'))).toMatchObject({ code: 'device_busy' });
    expect(phone.screen).toBe('settings');
    const listed = ok(await bob('list_devices')).devices[0].lease;
    expect(listed).toEqual({ state: 'others', leaseId: null, expiresAt: 1_060_000 });
  });

  it('a stale lease id gets lease_mismatch without acting', async () => {
    const { phone, alice } = await setup();
    const { leaseId } = ok(await alice('take_device'));
    ok(await alice('release_device', { leaseId }));
    expect(err(await alice('open_app', { packageName: 'com.android.settings', leaseId }))).toMatchObject({
      code: 'lease_mismatch',
    });
    expect(err(await alice('observe_screen', { leaseId: 'lease-999' }))).toMatchObject({ code: 'lease_mismatch' });
    expect(err(await alice('release_device', { leaseId }))).toMatchObject({ code: 'lease_mismatch' });
    expect(phone.screen).toBe('home');
  });

  it("someone else's lease id is a mismatch too", async () => {
    const { alice, bob } = await setup();
    const { leaseId } = ok(await alice('take_device'));
    expect(err(await bob('tap', { x: 10, y: 300, leaseId }))).toMatchObject({ code: 'lease_mismatch' });
    expect(err(await bob('release_device', { leaseId }))).toMatchObject({ code: 'lease_mismatch' });
  });

  it('release then take works for the other caller', async () => {
    const { alice, bob } = await setup();
    const first = ok(await alice('take_device'));
    expect(ok(await alice('take_device'))).toMatchObject({ leaseId: first.leaseId, renewed: true });
    expect(ok(await alice('release_device', { leaseId: first.leaseId }))).toEqual({
      deviceId: 'phone-1',
      leaseId: first.leaseId,
      released: true,
    });
    const second = ok(await bob('take_device'));
    expect(second.leaseId).not.toBe(first.leaseId);
    expect(ok(await bob('press_key', { key: 'HOME', leaseId: second.leaseId })).leaseId).toBe(second.leaseId);
    expect(ok(await bob('list_devices')).devices[0].lease).toMatchObject({ state: 'yours', leaseId: second.leaseId });
  });

  it('use renews the lease; expiry frees the device', async () => {
    const { clock, alice, bob } = await setup();
    const { leaseId } = ok(await alice('take_device'));
    clock.t += 50_000;
    ok(await alice('observe_screen', { leaseId })); // renews to t + 60 s
    clock.t += 50_000;
    expect(err(await bob('press_key', { key: 'HOME' })).code).toBe('lease_required');
    clock.t += 10_000; // 60 s after the last use
    expect(ok(await bob('list_devices')).devices[0].lease.state).toBe('free');
    expect(ok(await bob('press_key', { key: 'HOME' })).leaseId).toBe('lease-2'); // taken implicitly
    expect(err(await alice('press_key', { key: 'HOME', leaseId })).code).toBe('lease_mismatch');
  });

  it('acting on a free device takes the lease only with devices:lease', async () => {
    const { phone, alice, actOnly } = await setup();
    expect(ok(await actOnly('observe_screen')).leaseId).toBeNull(); // looking does not take it
    expect(err(await actOnly('open_app', { packageName: 'com.android.settings' }))).toMatchObject({
      code: 'lease_required',
      message: expect.stringContaining('devices:lease'),
    });
    expect(phone.screen).toBe('home');
    expect(ok(await alice('open_app', { packageName: 'com.android.settings' })).leaseId).toBe('lease-1');
    expect(ok(await alice('list_devices')).devices[0].lease.state).toBe('yours');
  });

  it('an act the phone refuses on a free device leaves it free', async () => {
    const { phone, alice, bob } = await setup();
    expect(err(await alice('tap', { x: 5000, y: 10 })).code).toBe('out_of_bounds');
    expect(err(await alice('tap', { elementId: 'nope' })).code).toBe('element_not_found');
    expect(err(await alice('open_app', { packageName: 'com.nope' })).code).toBe('app_not_found');
    expect(err(await alice('type_text', { text: 'hi' })).code).toBe('no_focused_field');
    expect(ok(await alice('list_devices')).devices[0].lease).toEqual({ state: 'free', leaseId: null, expiresAt: null });
    expect(ok(await bob('take_device')).renewed).toBe(false); // not device_busy: nobody holds it
    expect(phone.screen).toBe('home');
  });
});
