// phonebridge_event_loop_delay_seconds: a stall shows up as one window's worst delay.
import { expect, it } from 'vitest';
import { registry, trackNode, EVENT_LOOP_WINDOW_MS } from './metrics.ts';

async function stallBuckets(): Promise<{ count: number; underTenthOfASecond: number }> {
  const m = await registry.getSingleMetric('phonebridge_event_loop_delay_seconds')!.get();
  const values = m.values as Array<{ metricName?: string; labels: Record<string, unknown>; value: number }>;
  const bucket = (le: number) => values.find((v) => v.metricName?.endsWith('_bucket') && v.labels.le === le)!.value;
  return { count: values.find((v) => v.metricName?.endsWith('_count'))!.value, underTenthOfASecond: bucket(0.1) };
}

it('records a 300 ms stall of the event loop in the window it happened', async () => {
  const untrack = trackNode({
    pending: () => 0,
    onPhones: () => 0,
    draining: () => false,
    storeUp: () => undefined,
    redisUp: () => undefined,
  });
  try {
    const before = await stallBuckets();
    await new Promise((r) => setTimeout(r, 50));
    const t = Date.now();
    while (Date.now() - t < 300); // a synchronous stall
    await new Promise((r) => setTimeout(r, EVENT_LOOP_WINDOW_MS * 2.5));
    const after = await stallBuckets();
    expect(after.count - before.count).toBeGreaterThanOrEqual(1);
    // At least one window saw more than 100 ms: the stall (nothing else here blocks that long).
    expect(
      after.count - after.underTenthOfASecond - (before.count - before.underTenthOfASecond),
    ).toBeGreaterThanOrEqual(1);
  } finally {
    untrack();
  }
});
