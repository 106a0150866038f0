// Fleet figures for operators: no per-phone, per-key or per-label values (bounded series).
import client from 'prom-client';
import { LATENCY_BUCKETS, registry } from '../metrics.ts';
import type { Store } from '../store/index.ts';

export const fleetMetrics = {
  allocations: new client.Counter({
    name: 'phonebridge_fleet_allocation_requests_total',
    help: 'Allocation requests by outcome (allocated, none_available)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  allocationWait: new client.Histogram({
    name: 'phonebridge_fleet_allocation_wait_seconds',
    help: 'From an allocation request to the phone handed out (wait_s included)',
    buckets: [...LATENCY_BUCKETS],
    registers: [registry],
  }),
  allocationWaiting: new client.Gauge({
    name: 'phonebridge_fleet_allocation_waiting',
    help: 'Allocation requests on this node waiting (wait_s) for a phone to become free',
    registers: [registry],
  }),
  releases: new client.Counter({
    name: 'phonebridge_fleet_allocation_releases_total',
    help: 'Allocations released by their holder',
    registers: [registry],
  }),
};

// Both outcomes exist from the start (a scrape before the first allocation shows 0, not nothing).
for (const outcome of ['allocated', 'none_available']) fleetMetrics.allocations.inc({ outcome }, 0);

/** The store the gauges read at scrape time (the node's, set when the feature starts). */
let gaugeStore: Store | undefined;

/**
 * How long a scrape waits for the store. A store that stops answering must not hold /metrics:
 * Prometheus would give up on the scrape (10 s by default) and lose every series of the node —
 * phonebridge_store_up among them — exactly while it matters.
 */
export const SCRAPE_STORE_WAIT_MS = 500;

/** The read's value, or `undefined` when it fails or takes longer than SCRAPE_STORE_WAIT_MS. */
async function boundedRead<T>(read: () => Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), SCRAPE_STORE_WAIT_MS);
  });
  try {
    return await Promise.race([read().catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Read from the store at scrape time (cluster-wide: the same figures on every node):
 * live allocations, and phones paired through enrollment codes. Registered with the module, so
 * the series exist (at 0) before the feature starts. When the store does not answer in time the
 * gauges keep their last values (phonebridge_store_up says why).
 */
export function trackFleetGauges(store: Store): void {
  gaugeStore = store;
}

new client.Gauge({
  name: 'phonebridge_fleet_allocations_active',
  help: 'Unexpired allocations in the cluster (the same figure on every node)',
  registers: [registry],
  async collect() {
    const store = gaugeStore;
    if (!store) return this.set(0);
    const n = await boundedRead(() => store.fleet.countAllocations(new Date()));
    if (n !== undefined) this.set(n);
  },
});

const enrollmentPhones = new client.Gauge({
  name: 'phonebridge_fleet_enrollment_phones',
  help: 'Phones paired through enrollment codes, by the state of their code',
  labelNames: ['state'] as const,
  registers: [registry],
  async collect() {
    const store = gaugeStore;
    const list = store ? await boundedRead(() => store.fleet.listEnrollments()) : [];
    if (list === undefined) return;
    const now = Date.now();
    const by = { active: 0, ended: 0 };
    for (const e of list)
      by[!e.revokedAt && e.expiresAt.getTime() > now && e.used < e.maxPhones ? 'active' : 'ended'] += e.used;
    this.set({ state: 'active' }, by.active);
    this.set({ state: 'ended' }, by.ended);
  },
});
// Both states from the start, so a first scrape during a store outage still has them.
for (const state of ['active', 'ended']) enrollmentPhones.set({ state }, 0);
