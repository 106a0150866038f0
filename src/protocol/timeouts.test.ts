import { describe, expect, it } from 'vitest';
import { LONG_POLL_GRACE_MS, MAX_TIMEOUT_MS, headerTimeoutMs, requestTimeoutMs, waitSeconds } from './timeouts.ts';

const declared = (type = 'integer', header = 'Timeout') => ({
  type: 'object',
  properties: { timeout_s: { type, 'x-mcp-header': header } },
});

describe('headerTimeoutMs', () => {
  it('sizes from the declared Timeout header: seconds plus the grace, capped', () => {
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '40' })).toBe(40_000 + LONG_POLL_GRACE_MS);
    expect(headerTimeoutMs(declared(), { 'Mcp-Param-Timeout': ' 0 ' })).toBe(LONG_POLL_GRACE_MS);
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '999999' })).toBe(MAX_TIMEOUT_MS);
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '=?base64?NDA=?=' })).toBe(40_000 + LONG_POLL_GRACE_MS);
  });
  it('sizes from every value validateParamHeaders lets through as equal to a whole-seconds body', () => {
    // The header was checked against the body first (integers compared numerically): a value it
    // accepted must not fall back to the 30 s default of a tool that is not wait_for_events.
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '120.0' })).toBe(120_000 + LONG_POLL_GRACE_MS);
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '1000000' })).toBe(MAX_TIMEOUT_MS);
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '1e3' })).toBe(MAX_TIMEOUT_MS);
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '90071992547409910' })).toBe(MAX_TIMEOUT_MS);
  });
  it('is undefined (body fallback) without a declaration, a header, or with a value that is not whole seconds', () => {
    expect(headerTimeoutMs({ type: 'object', properties: {} }, { 'mcp-param-timeout': '40' })).toBeUndefined();
    expect(headerTimeoutMs(declared(), {})).toBeUndefined();
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '1.5' })).toBeUndefined();
    expect(headerTimeoutMs(declared(), { 'mcp-param-timeout': '-3' })).toBeUndefined();
    expect(headerTimeoutMs(declared('string'), { 'mcp-param-timeout': '40' })).toBeUndefined();
    expect(headerTimeoutMs(declared('integer', 'Other'), { 'mcp-param-other': '40' })).toBeUndefined();
  });
  it('leaves the body parse as it was for the session revisions', () => {
    expect(requestTimeoutMs('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 40 } })).toBe(
      40_000 + LONG_POLL_GRACE_MS,
    );
    // timeout_s is a number of seconds: fractions size the call to the millisecond (decision 0184).
    expect(requestTimeoutMs('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 1.5 } })).toBe(
      1_500 + LONG_POLL_GRACE_MS,
    );
  });
  it('sizes from a declared Timeout-Ms header in whole milliseconds (decision 0212)', () => {
    const ms = { type: 'object', properties: { timeout_ms: { type: 'integer', 'x-mcp-header': 'Timeout-Ms' } } };
    expect(headerTimeoutMs(ms, { 'mcp-param-timeout-ms': '2500' })).toBe(2_500 + LONG_POLL_GRACE_MS);
    expect(headerTimeoutMs(ms, { 'Mcp-Param-Timeout-Ms': '0' })).toBe(LONG_POLL_GRACE_MS);
    expect(headerTimeoutMs(ms, { 'mcp-param-timeout-ms': '700000' })).toBe(MAX_TIMEOUT_MS);
    // The seconds header of another tool is not this one's.
    expect(headerTimeoutMs(ms, { 'mcp-param-timeout': '40' })).toBeUndefined();
  });
});

describe('wait_for_events in the body: timeout_s or timeout_ms', () => {
  const call = (args: Record<string, unknown>) =>
    requestTimeoutMs('tools/call', { name: 'wait_for_events', arguments: args });
  it('reads timeout_ms as milliseconds, and the longer of the two when both come', () => {
    expect(call({ timeout_ms: 1_500 })).toBe(1_500 + LONG_POLL_GRACE_MS);
    expect(call({ timeout_ms: 40_000, timeout_s: 2 })).toBe(40_000 + LONG_POLL_GRACE_MS);
    expect(call({ timeout_ms: 1, timeout_s: 2 })).toBe(2_000 + LONG_POLL_GRACE_MS);
    expect(call({ timeout_ms: 10_000_000 })).toBe(MAX_TIMEOUT_MS);
  });
  it('falls back to the relay default when neither is a usable number', () => {
    expect(call({})).toBe(30_000);
    expect(call({ timeout_ms: '5000' })).toBe(30_000);
    expect(call({ timeout_ms: -1, timeout_s: Number.NaN })).toBe(30_000);
    expect(waitSeconds(undefined, undefined)).toBeUndefined();
    expect(waitSeconds(undefined, 250)).toBe(0.25);
  });
});
