import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GatewayContext } from './context.ts';
import type { PeerDirectory } from './peer-directory.ts';
import { RemoteRequests } from './remote-requests.ts';
import type { RemotePending, Route } from './route.ts';

// The origin's table of requests out at other nodes, without a router, a bus or a phone: their
// deadlines (`add`, `settle`, the host's `timedOut`), and how they end when their node is
// reported down (a bus that only answers ownerOf).
function pending(rid: number): RemotePending {
  return {
    rid,
    route: { rid } as unknown as Route,
    node: 'n2',
    epoch: 1,
    sentAt: Date.now(),
    cached: false,
    moving: false,
    sent: Promise.resolve(true),
    dueAt: 0,
    prevDue: undefined,
    nextDue: undefined,
    dueList: undefined,
  };
}

let table: RemoteRequests | undefined;
afterEach(() => table?.close());

describe('RemoteRequests deadlines', () => {
  it('times out a request nobody answered, once, not before its time; never one settled first', async () => {
    const timedOut: Array<{ rid: number; at: number; route: Route }> = [];
    const t: RemoteRequests = new RemoteRequests({} as GatewayContext, {} as PeerDirectory, {
      // As the router does: whoever settles the request decides its end.
      timedOut: (rid, route) => {
        if (t.settle(rid)) timedOut.push({ rid, at: performance.now(), route });
      },
      routeAgain: () => {},
      movedFrom: () => Promise.resolve(false),
    });
    table = t;
    const started = performance.now();
    const [a, b, c, d] = [1, 2, 3, 4].map(pending);
    t.add(a, 40);
    t.add(b, 40);
    t.add(c, 80); // a delay of its own
    t.add(d, 40);
    expect(t.settle(2)).toBe(b); // answered in time
    await vi.waitFor(() => expect(timedOut.length).toBe(3), { timeout: 5_000, interval: 5 });
    await new Promise((r) => setTimeout(r, 60));
    expect(timedOut.map((x) => x.rid)).toEqual([1, 4, 3]);
    expect(timedOut[0].route).toBe(a.route);
    for (const x of timedOut) expect(x.at - started).toBeGreaterThanOrEqual(x.rid === 3 ? 79 : 39);
    for (const rid of [1, 2, 3, 4]) expect(t.get(rid)).toBeUndefined();
  });

  it('close stops every deadline: no request times out after it', async () => {
    const timedOut: number[] = [];
    const t = new RemoteRequests({} as GatewayContext, {} as PeerDirectory, {
      timedOut: (rid) => timedOut.push(rid),
      routeAgain: () => {},
      movedFrom: () => Promise.resolve(false),
    });
    table = t;
    t.add(pending(1), 20);
    t.add(pending(2), 30);
    t.close();
    await new Promise((r) => setTimeout(r, 80));
    expect(timedOut).toEqual([]);
  });
});

describe('RemoteRequests when their node is reported down', () => {
  const peers = { departure: () => undefined, endDeparture: () => {} } as unknown as PeerDirectory;
  const failedWith = (owner: () => Promise<unknown>) => {
    const errors: Array<{ code?: string }> = [];
    const ctx = { bus: { ownerOf: owner } } as unknown as GatewayContext;
    const t = new RemoteRequests(ctx, peers, {
      timedOut: () => {},
      routeAgain: () => {},
      movedFrom: () => Promise.resolve(false),
    });
    table = t;
    const p = pending(1);
    p.route = {
      rid: 1,
      deviceId: 'd1',
      done: false,
      sink: { fail: (e: { data?: { code?: string } }) => errors.push(e.data ?? {}) },
    } as unknown as Route;
    t.add(p, 60_000);
    return { t, errors };
  };

  it('fails a request as device_offline when the bus says its phone is nowhere', async () => {
    const { t, errors } = failedWith(() => Promise.resolve(undefined));
    await t.nodeGone('n2', 'down');
    expect(errors).toEqual([{ code: 'device_offline' }]);
  });

  it('fails it as relay_unavailable, not device_offline, when the bus cannot say where its phone is', async () => {
    const { t, errors } = failedWith(() => Promise.reject(new Error('cluster bus unavailable')));
    await t.nodeGone('n2', 'down');
    expect(errors).toEqual([{ code: 'relay_unavailable' }]);
  });
});

describe('RemoteRequests owner check', () => {
  // The periodic check of requests older than 0.5 s (checkOwners), with a directory that only
  // answers lookups: docs/decisions/0210-no-phone-offline-because-redis-was-down.md, rule 5.
  const watched = (owner: { nodeId: string; epoch: number } | undefined) => {
    const errors: Array<{ code?: string }> = [];
    let lookups = 0;
    const peers = {
      lookupOwner: () => {
        lookups++;
        return Promise.resolve(owner);
      },
      hasDeparted: () => false,
    } as unknown as PeerDirectory;
    const t = new RemoteRequests({ bus: { available: true } } as unknown as GatewayContext, peers, {
      timedOut: () => {},
      routeAgain: () => {},
      movedFrom: () => Promise.resolve(false),
    });
    const p = pending(1);
    p.sentAt = Date.now() - 1_000;
    p.route = {
      rid: 1,
      deviceId: 'd1',
      done: false,
      sink: { fail: (e: { data?: { code?: string } }) => errors.push(e.data ?? {}) },
    } as unknown as Route;
    t.add(p, 60_000);
    return { t, errors, lookups: () => lookups };
  };

  it('fails a request whose phone another node owns now, and leaves one whose phone no live node owns to its node', async () => {
    const moved = watched({ nodeId: 'n3', epoch: 2 });
    const lapsed = watched(undefined); // its node's liveness lapsed in a Redis outage, say: still serving it
    try {
      await vi.waitFor(() => expect(moved.errors).toEqual([{ code: 'device_offline' }]), { timeout: 5_000 });
      await vi.waitFor(() => expect(lapsed.lookups()).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
      expect(lapsed.errors).toEqual([]);
      expect(lapsed.t.get(1)).toBeDefined();
    } finally {
      moved.t.close();
      lapsed.t.close();
    }
  });
});
