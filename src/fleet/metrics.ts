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
 * Read from the store at scrape time (cluster-wide: the same figures on every node):
 * live allocations, and phones paired through enrollment codes. Registered with the module, so
 * the series exist (at 0) before the feature starts.
 */
export function trackFleetGauges(store: Store): void {
  gaugeStore = store;
}

new client.Gauge({
  name: 'phonebridge_fleet_allocations_active',
  help: 'Unexpired allocations in the cluster (the same figure on every node)',
  registers: [registry],
  async collect() {
    this.set(gaugeStore ? await gaugeStore.fleet.countAllocations(new Date()).catch(() => 0) : 0);
  },
});

new client.Gauge({
  name: 'phonebridge_fleet_enrollment_phones',
  help: 'Phones paired through enrollment codes, by the state of their code',
  labelNames: ['state'] as const,
  registers: [registry],
  async collect() {
    const list = gaugeStore ? await gaugeStore.fleet.listEnrollments().catch(() => []) : [];
    const now = Date.now();
    const by = { active: 0, ended: 0 };
    for (const e of list)
      by[!e.revokedAt && e.expiresAt.getTime() > now && e.used < e.maxPhones ? 'active' : 'ended'] += e.used;
    this.set({ state: 'active' }, by.active);
    this.set({ state: 'ended' }, by.ended);
  },
});
