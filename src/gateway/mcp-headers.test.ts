import { describe, expect, it } from 'vitest';
import type { HttpRequest } from '../uws.ts';
import { collectHeaders, FORWARDED_CHAIN } from './mcp-headers.ts';

/** A request whose forEach visits these (name, value) lines in order, as uWS does. */
const request = (lines: Array<[string, string]>) =>
  ({ forEach: (cb: (k: string, v: string) => void) => lines.forEach(([k, v]) => cb(k, v)) }) as unknown as HttpRequest;

describe('collectHeaders', () => {
  it('keeps the first non-empty value of the headers read once', () => {
    const h = collectHeaders(
      request([
        ['x-api-key', ''],
        ['x-api-key', 'k1'],
        ['x-api-key', 'k2'],
        ['mcp-session-id', 's1'],
        ['mcp-session-id', 's2'],
        ['accept', 'application/json'],
        ['accept', 'text/event-stream'],
      ]),
      false,
    );
    expect({ key: h['x-api-key'], session: h['mcp-session-id'], accept: h.accept }).toEqual({
      key: 'k1',
      session: 's1',
      accept: 'application/json',
    });
  });

  it('joins the lines of a header 2026-07-28 checks against the body with ", " (RFC 9110 §5.3)', () => {
    const h = collectHeaders(
      request([
        ['mcp-protocol-version', '2026-07-28'],
        ['mcp-method', 'tools/call'],
        ['mcp-name', 'echo'],
        ['mcp-param-region', 'us'],
        ['mcp-protocol-version', '2025-11-25'],
        ['mcp-method', 'tools/list'],
        ['mcp-name', 'tap'],
        ['mcp-param-region', 'eu'],
      ]),
      false,
    );
    expect({
      version: h['mcp-protocol-version'],
      method: h['mcp-method'],
      name: h['mcp-name'],
      region: h['mcp-param-region'],
    }).toEqual({
      version: '2026-07-28, 2025-11-25',
      method: 'tools/call, tools/list',
      name: 'echo, tap',
      region: 'us, eu',
    });
  });

  it('counts an empty line among several, and a single one as no header (Mcp-Param-*: an empty string)', () => {
    const several = collectHeaders(
      request([
        ['mcp-name', ''],
        ['mcp-name', 'echo'],
        ['mcp-method', 'tools/call'],
        ['mcp-method', ''],
      ]),
      false,
    );
    expect({ name: several['mcp-name'], method: several['mcp-method'] }).toEqual({
      name: ', echo',
      method: 'tools/call, ',
    });
    const single = collectHeaders(
      request([
        ['mcp-protocol-version', ''],
        ['mcp-method', ''],
        ['mcp-name', ''],
        ['mcp-param-region', ''],
      ]),
      false,
    );
    expect({
      version: single['mcp-protocol-version'],
      method: single['mcp-method'],
      name: single['mcp-name'],
      region: single['mcp-param-region'],
    }).toEqual({ version: undefined, method: undefined, name: undefined, region: '' });
  });

  it('keeps every X-Forwarded-For value, comma-joined, only when proxies are trusted', () => {
    const lines: Array<[string, string]> = [
      ['x-forwarded-for', '1.1.1.1'],
      ['x-forwarded-for', '2.2.2.2'],
    ];
    expect(collectHeaders(request(lines), true)[FORWARDED_CHAIN]).toBe('1.1.1.1,2.2.2.2');
    expect(collectHeaders(request(lines), false)[FORWARDED_CHAIN]).toBeUndefined();
    expect(collectHeaders(request(lines), true)['x-forwarded-for']).toBe('1.1.1.1');
  });

  it('copies every header /mcp reads, first non-empty value, and no other', () => {
    const read = [
      'x-api-key',
      'authorization',
      'mcp-session-id',
      'accept',
      'content-type',
      'origin',
      'last-event-id',
      'x-forwarded-for',
    ];
    const lines: Array<[string, string]> = [
      ['host', '127.0.0.1'],
      ['content-length', '12'],
      ['connection', 'keep-alive'],
      ['user-agent', 'test'],
      ['mcp-params', 'not a param header'],
      ...read.flatMap((k): Array<[string, string]> => [
        [k, ''],
        [k, `${k} value`],
        [k, 'second'],
      ]),
    ];
    const h = collectHeaders(request(lines), false);
    const present = Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined));
    expect(present).toEqual(Object.fromEntries(read.map((k) => [k, `${k} value`])));
  });
});
