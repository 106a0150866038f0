// Errors the bus raises; the gateway maps BusUnavailableError to the `relay_unavailable` relay error.

/** The shared backend (Redis) cannot be reached right now. Raised fast, never after a long hang. */
export class BusUnavailableError extends Error {
  readonly code = 'relay_unavailable' as const;
  constructor(message = 'cluster bus unavailable', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BusUnavailableError';
  }
}
