// Fleet figures for operators (no per-phone or per-label values: bounded series).
import client from 'prom-client';
import { registry } from '../metrics.ts';

export const fleetMetrics = {
  allocations: new client.Counter({
    name: 'phonebridge_fleet_allocation_requests_total',
    help: 'Allocation requests by outcome (allocated, none_available)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  allocationWait: new client.Histogram({
    name: 'phonebridge_fleet_allocation_wait_seconds',
    help: 'Time from an allocation request to the phone handed out',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  }),
  releases: new client.Counter({
    name: 'phonebridge_fleet_allocation_releases_total',
    help: 'Allocations released by their holder',
    registers: [registry],
  }),
  enrollments: new client.Counter({
    name: 'phonebridge_fleet_enrollment_pairings_total',
    help: 'Phones paired with an enrollment code',
    registers: [registry],
  }),
};

/** phonebridge_fleet_allocations_active: read from the store at scrape time (cluster-wide, same on every node). */
export function trackActiveAllocations(count: () => Promise<number>): void {
  if (registry.getSingleMetric('phonebridge_fleet_allocations_active'))
    registry.removeSingleMetric('phonebridge_fleet_allocations_active');
  new client.Gauge({
    name: 'phonebridge_fleet_allocations_active',
    help: 'Unexpired allocations in the cluster (the same figure on every node)',
    registers: [registry],
    async collect() {
      this.set(await count().catch(() => 0));
    },
  });
}
