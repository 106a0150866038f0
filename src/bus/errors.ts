// Errors the bus raises; the gateway maps BusUnavailableError to the `relay_unavailable` relay error.

/** The shared backend (Redis) cannot be reached right now. Raised fast, never after a long hang. */
export class BusUnavailableError extends Error {
  readonly code = 'relay_unavailable' as const;
  constructor(message = 'cluster bus unavailable', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BusUnavailableError';
  }
}

/**
 * Redis did not answer a command in time, on a connection that is still open: the command may
 * well have run (its reply can be queued behind others, or behind this process's own busy
 * event loop, whose timers fire before it reads the socket). Also a message sent without its
 * reply (sendOrBounce) whose connection closed before Redis confirmed it. A publish that fails
 * this way is in doubt, not lost.
 */
export class BusTimeoutError extends BusUnavailableError {
  constructor(message = 'cluster bus did not answer in time', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BusTimeoutError';
  }
}
