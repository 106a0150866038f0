import { describe, expect, it } from 'vitest';
import { classify, classifyClientMessage, parseBody } from './jsonrpc.ts';
import { requestTimeoutMs } from './timeouts.ts';
import { withCallerContext } from './caller.ts';
import { negotiateRevision, allowsBatch } from './revisions.ts';

describe('classify', () => {
  it('tells requests, notifications and responses apart', () => {
    expect(classify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }).kind).toBe('request');
    expect(classify({ jsonrpc: '2.0', method: 'notifications/initialized' }).kind).toBe('notification');
    expect(classify({ jsonrpc: '2.0', id: 1, result: {} }).kind).toBe('response');
  });
  it('rejects what is not JSON-RPC 2.0 with -32600', () => {
    for (const bad of [
      null,
      1,
      'x',
      [],
      { id: 1, method: 'x' },
      { jsonrpc: '1.0', id: 1, method: 'x' },
      { jsonrpc: '2.0', id: {}, method: 'x' },
      { jsonrpc: '2.0', id: 1, method: 'x', params: [1] },
      { jsonrpc: '2.0' },
    ]) {
      const c = classify(bad);
      expect(c.kind).toBe('invalid');
      if (c.kind === 'invalid') expect(c.error.code).toBe(-32600);
    }
  });
  it("refuses a client request whose _meta an MCP server would drop unanswered, with -32602 and the request's id", () => {
    // The phone's SDK drops a frame whose progressToken or related-task breaks the schema: the
    // client would wait for a timeout instead of learning its mistake.
    for (const meta of [
      { progressToken: null },
      { progressToken: true },
      { progressToken: { a: 1 } },
      { progressToken: [1] },
      { 'io.modelcontextprotocol/related-task': 'x' },
      { 'io.modelcontextprotocol/related-task': { taskId: 5 } },
    ]) {
      const c = classifyClientMessage({
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { name: 'x', _meta: meta },
      });
      expect(c.kind).toBe('invalid');
      if (c.kind === 'invalid') {
        expect(c.id).toBe(4);
        expect(c.error.code).toBe(-32602);
        expect(c.error.message).toMatch(/^Invalid params: params\._meta/);
      }
    }
    for (const meta of [{ progressToken: 'a' }, { progressToken: 7 }, { progressToken: 1.5 }, { other: null }]) {
      expect(classifyClientMessage({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { _meta: meta } }).kind).toBe(
        'request',
      );
    }
    // The relay sets _meta itself when it is not an object, and a phone's own frames are not the client's.
    expect(classifyClientMessage({ jsonrpc: '2.0', id: 4, method: 'x', params: { _meta: 'x' } }).kind).toBe('request');
    expect(classify({ jsonrpc: '2.0', id: 4, method: 'x', params: { _meta: { progressToken: null } } }).kind).toBe(
      'request',
    );
  });
  it('reports a parse error as -32700', () => {
    const r = parseBody(Buffer.from('{"a":'));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe(-32700);
  });
  it('refuses bytes that are not UTF-8 as -32700, not read with U+FFFD in their place', () => {
    const r = parseBody(Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]));
    expect(r).toEqual({ ok: false, error: { code: -32700, message: 'Parse error: body is not valid UTF-8' } });
  });
});

describe('timeouts', () => {
  it('gives 30 s by default and wait_for_events its timeout_s + 15 s, capped at 615 s', () => {
    expect(requestTimeoutMs('tools/call', { name: 'tap', arguments: { timeout_s: 500 } })).toBe(30_000);
    expect(requestTimeoutMs('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 60 } })).toBe(75_000);
    expect(requestTimeoutMs('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 600 } })).toBe(615_000);
    expect(requestTimeoutMs('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 10_000 } })).toBe(615_000);
    expect(requestTimeoutMs('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 'x' } })).toBe(30_000);
    expect(requestTimeoutMs('resources/read', undefined)).toBe(30_000);
  });
});

describe('caller context', () => {
  it('replaces a spoofed caller and keeps other _meta', () => {
    const p = withCallerContext(
      { name: 'tap', _meta: { 'phonebridge/caller': { credential: 'root' }, progressToken: 7 } },
      { id: 'key_1', scopes: ['devices:read'] },
    );
    expect(p._meta).toEqual({
      'phonebridge/caller': { credential: 'key_1', scopes: ['devices:read'] },
      progressToken: 7,
    });
    expect(withCallerContext(undefined, { id: 'k', scopes: [] })._meta).toEqual({
      'phonebridge/caller': { credential: 'k', scopes: [] },
    });
  });
});

describe('revisions', () => {
  it('echoes a supported revision and falls back to the latest', () => {
    expect(negotiateRevision('2025-03-26')).toBe('2025-03-26');
    expect(negotiateRevision('1999-01-01')).toBe('2025-11-25');
    expect(allowsBatch('2025-03-26')).toBe(true);
    expect(allowsBatch('2025-06-18')).toBe(false);
  });
});
