import { describe, expect, it } from 'vitest';
import type { HttpRequest } from '../uws.ts';
import { collectHeaders, FORWARDED_CHAIN } from './mcp-headers.ts';

/**
 * A request of these (name, value) lines, as uWS reads them: forEach visits every line in order,
 * getHeader gives a name's first line ('' for none). `passes` counts the forEach calls.
 */
let passes = 0;
const request = (lines: Array<[string, string]>) =>
  ({
    forEach: (cb: (k: string, v: string) => void) => {
      passes++;
      lines.forEach(([k, v]) => cb(k, v));
    },
    getHeader: (name: ArrayBuffer) => lines.find(([k]) => k === Buffer.from(name).toString())?.[1] ?? '',
  }) as unknown as HttpRequest;

describe('collectHeaders', () => {
  it('keeps the first non-empty value of the headers read once, on the pass over every header', () => {
    const h = collectHeaders(
      request([
        ['x-api-key', ''],
        ['x-api-key', 'k1'],
        ['x-api-key', 'k2'],
        ['mcp-session-id', ''],
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

  it('reads a session request of a session-era revision (or none) by name: first lines, no pass', () => {
    const twoVersions: Array<[string, string]> = [
      ['mcp-protocol-version', '2025-11-25'],
      ['mcp-protocol-version', '2026-07-28'],
    ];
    for (const version of [twoVersions, []]) {
      const before = passes;
      const h = collectHeaders(
        request([
          ['host', '127.0.0.1'],
          ['mcp-session-id', 's1'],
          ['mcp-session-id', 's2'],
          ...version,
          ['x-api-key', ''],
          ['x-api-key', 'k1'],
          ['authorization', 'Bearer t'],
          ['accept', 'application/json'],
          ['accept', 'text/event-stream'],
          ['content-type', 'application/json'],
          ['origin', 'https://a.example'],
          ['last-event-id', 'e1'],
          ['x-forwarded-for', '1.1.1.1'],
          ['x-forwarded-for', '2.2.2.2'],
          ['mcp-method', 'tools/call'],
          ['mcp-name', 'echo'],
          ['mcp-param-region', 'us'],
        ]),
        true,
      );
      expect(passes).toBe(before);
      const present = Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined));
      // The first line counts, an empty one as no header; what only 2026-07-28 or initialize reads
      // (Mcp-Method, Mcp-Name, Mcp-Param-*, X-Forwarded-For) is not read.
      expect(present).toEqual({
        'mcp-session-id': 's1',
        ...(version.length ? { 'mcp-protocol-version': '2025-11-25' } : {}),
        authorization: 'Bearer t',
        accept: 'application/json',
        'content-type': 'application/json',
        origin: 'https://a.example',
        'last-event-id': 'e1',
      });
    }
  });

  it('reads Last-Event-ID by name only where asked (a POST never resumes)', () => {
    const lines: Array<[string, string]> = [
      ['mcp-session-id', 's1'],
      ['last-event-id', 'e1'],
    ];
    expect(collectHeaders(request(lines), false, false)['last-event-id']).toBeUndefined();
    expect(collectHeaders(request(lines), false, true)['last-event-id']).toBe('e1');
  });

  it('passes over every header for a request without a session or with a version of no session era', () => {
    for (const lines of [
      [['mcp-protocol-version', '2025-11-25']],
      [
        ['mcp-session-id', ''],
        ['mcp-session-id', 's1'],
      ],
      [
        ['mcp-session-id', 's1'],
        ['mcp-protocol-version', '2026-07-28'],
      ],
      [
        ['mcp-session-id', 's1'],
        ['mcp-protocol-version', '1999-01-01'],
      ],
    ] as Array<Array<[string, string]>>) {
      const before = passes;
      const h = collectHeaders(request([...lines, ['mcp-name', 'echo'], ['mcp-name', 'tap']]), false);
      expect(passes).toBe(before + 1);
      expect(h['mcp-name']).toBe('echo, tap');
    }
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
