import { describe, expect, it } from 'vitest';
import { LONG_POLL_GRACE_MS, MAX_TIMEOUT_MS, headerTimeoutMs, requestTimeoutMs } from './timeouts.ts';

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
});
