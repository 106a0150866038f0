import { describe, expect, it } from 'vitest';
import type { HttpRequest, HttpResponse } from '../uws.ts';
import { Exchange, runRoute } from './http.ts';

// A uWS response as far as an Exchange uses one when it is made: its onAborted.
const response = () => ({ onAborted: () => undefined }) as unknown as HttpResponse;

describe('Exchange.arrivedAt: one reading of the clock per request', () => {
  it("is the route wrapper's reading for an Exchange made in its handler, read then or later", () => {
    let made: Exchange | undefined;
    let inHandler: number | undefined;
    runRoute(
      { draining: false },
      (res) => {
        made = new Exchange(res);
        inHandler = made.arrivedAt;
      },
      response(),
      {} as HttpRequest,
      undefined,
      false,
      1_234,
    );
    expect(inHandler).toBe(1_234);
    // A body read after the handler returned (FastPost) reads the same arrival.
    expect(made!.arrivedAt).toBe(1_234);
  });

  it('is read from the clock once for an Exchange made outside a wrapped handler', () => {
    runRoute({ draining: false }, () => undefined, response(), {} as HttpRequest, undefined, false, 1_234);
    const before = Date.now();
    const ex = new Exchange(response());
    const first = ex.arrivedAt;
    expect(first).toBeGreaterThanOrEqual(before);
    expect(first).toBeLessThanOrEqual(Date.now());
    expect(ex.arrivedAt).toBe(first);
  });
});
