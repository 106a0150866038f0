import { describe, expect, it } from 'vitest';
import { BusUnavailableError } from '../bus/index.ts';
import type { Bus } from '../bus/types.ts';
import type { Logger } from '../log.ts';
import { DeviceReleases, PENDING_RELEASES_MAX } from './device-releases.ts';

// The releases a bus outage kept from Redis, against a bus that is only releaseDevice: up or
// down, with the owners it holds (compare-and-delete, as the Redis script).
function fakeBus() {
  const owners = new Map<string, number>();
  const calls: Array<[string, number]> = [];
  const state = { up: true };
  const bus = {
    releaseDevice(deviceId: string, epoch: number): Promise<boolean> {
      calls.push([deviceId, epoch]);
      if (!state.up) return Promise.reject(new BusUnavailableError());
      if (owners.get(deviceId) !== epoch) return Promise.resolve(false);
      owners.delete(deviceId);
      return Promise.resolve(true);
    },
  } as unknown as Bus;
  return { bus, owners, calls, state };
}
const log = { info() {}, warn() {} } as unknown as Logger;

describe('DeviceReleases', () => {
  it('keeps a release the bus could not take and makes it when the bus is back', async () => {
    const b = fakeBus();
    const r = new DeviceReleases(b.bus, log);
    b.owners.set('p', 3);
    b.state.up = false;
    await r.release('p', 3);
    expect(r.size).toBe(1);
    expect(b.owners.get('p')).toBe(3);
    await r.retry(); // still down: kept
    expect(r.size).toBe(1);
    b.state.up = true;
    await r.retry();
    expect(r.size).toBe(0);
    expect(b.owners.has('p')).toBe(false);
  });

  it('leaves a claim taken since alone (compare-and-delete), and forgets a phone claimed here again', async () => {
    const b = fakeBus();
    const r = new DeviceReleases(b.bus, log);
    b.state.up = false;
    await r.release('elsewhere', 1);
    await r.release('back-here', 1);
    r.forget('back-here');
    b.owners.set('elsewhere', 2); // the phone reconnected to another node meanwhile
    b.state.up = true;
    b.calls.length = 0;
    await r.retry();
    expect(b.calls).toEqual([['elsewhere', 1]]);
    expect(b.owners.get('elsewhere')).toBe(2);
    expect(r.size).toBe(0);
  });

  it('keeps at most PENDING_RELEASES_MAX, the oldest forgotten first', async () => {
    const b = fakeBus();
    const r = new DeviceReleases(b.bus, log);
    b.state.up = false;
    for (let i = 0; i <= PENDING_RELEASES_MAX; i++) await r.release(`d${i}`, 1);
    expect(r.size).toBe(PENDING_RELEASES_MAX);
    b.state.up = true;
    b.calls.length = 0;
    await r.retry();
    expect(b.calls.some(([d]) => d === 'd0')).toBe(false);
    expect(b.calls.some(([d]) => d === `d${PENDING_RELEASES_MAX}`)).toBe(true);
  });
});
