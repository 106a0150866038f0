// docs/decisions/0110-tracing-off-by-default-explicit-context.md: "Off means absent: no provider,
// processor, exporter or propagator object exists (the test asserts the module's state)".
// Loading the relay's tracing module (every node does, for the `tracingOn` boolean its call
// sites read) builds no W3C propagator; it is built on first use, with tracing on.
import { expect, it, vi } from 'vitest';
import type * as OtelCore from '@opentelemetry/core';

const built = vi.hoisted(() => ({ propagators: 0 }));
vi.mock('@opentelemetry/core', async (importOriginal) => {
  const real = await importOriginal<typeof OtelCore>();
  class CountedW3C extends real.W3CTraceContextPropagator {
    constructor() {
      super();
      built.propagators++;
    }
  }
  return { ...real, W3CTraceContextPropagator: CountedW3C };
});

it('with no OTEL_* variable, loading the relay builds no propagator', async () => {
  for (const k of Object.keys(process.env)) if (k.startsWith('OTEL_')) delete process.env[k];
  const tracing = await import('../../src/observability/tracing.ts');
  // What the gateway imports to read the boolean (src/gateway/in-flight.ts and others).
  await import('../../src/gateway/in-flight.ts');
  expect(await tracing.startRelayTracing('node-off')).toBeUndefined();
  expect(tracing.tracingOn).toBe(false);
  expect(tracing.relayTracingState()).toEqual({ on: false });
  expect(built.propagators).toBe(0);
});
