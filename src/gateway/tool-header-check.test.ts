// The tool-header check and sizing that run where the phone's catalog is (tool-header-check.ts),
// and the headers' trip across the bus (docs/PROTOCOL.md, "Tool headers"; docs/decisions/0181-tool-headers.md).
import { describe, expect, it } from 'vitest';
import { ToolCatalog } from '../protocol/scopes.ts';
import { decodeNodeMessage } from '../bus/formats.ts';
import { encode, type Header, type ReqHeader } from './node-messages.ts';
import { checkToolHeaders, paramHeaders, provisionalTimeoutMs } from './tool-header-check.ts';

const BASE = 30_000;
const tools = new ToolCatalog([
  {
    name: 'where',
    inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } },
  },
  {
    name: 'sleep',
    inputSchema: { type: 'object', properties: { seconds: { type: 'integer', 'x-mcp-header': 'Timeout' } } },
  },
  { name: 'plain', inputSchema: { type: 'object', properties: { seconds: { type: 'integer' } } } },
]);
const check = (name: string, args: Record<string, unknown>, headers: Record<string, string>, givenMs = 600_000) =>
  checkToolHeaders(tools, 'tools/call', { name, arguments: args }, headers, givenMs, BASE);

describe('tool headers checked where the catalog is', () => {
  it('keeps only the Mcp-Param-* headers of a request', () => {
    const h = { accept: 'application/json', 'mcp-name': 'x', 'mcp-param-region': 'eu', 'mcp-param-timeout': '5' };
    expect(paramHeaders({ ...h, origin: undefined })).toEqual({ 'mcp-param-region': 'eu', 'mcp-param-timeout': '5' });
    expect(paramHeaders({ accept: 'application/json' })).toEqual({});
  });

  it('refuses what the endpoint refuses: 400 / -32020 for a mismatch, a missing or an extra header', () => {
    expect(check('where', { region: 'us' }, { 'mcp-param-region': 'eu' })).toMatchObject({ error: { code: -32020 } });
    expect(check('where', { region: 'us' }, {})).toMatchObject({ error: { code: -32020 } });
    expect(check('where', {}, { 'mcp-param-region': 'eu' })).toMatchObject({ error: { code: -32020 } });
    expect(check('where', { region: 'eu' }, { 'mcp-param-region': ' eu ' })).toEqual({ timeoutMs: BASE });
  });

  it('sizes the call from a declared timeout header, else from the body, never past what is left', () => {
    expect(check('sleep', { seconds: 100 }, { 'mcp-param-timeout': '100' })).toEqual({ timeoutMs: 115_000 });
    expect(check('sleep', { seconds: 100 }, { 'mcp-param-timeout': '100' }, 50_000)).toEqual({ timeoutMs: 50_000 });
    // Not declared: the header sizes nothing.
    expect(check('plain', { seconds: 100 }, { 'mcp-param-timeout': '100' })).toEqual({ timeoutMs: BASE });
    // A tool the catalog does not know, or no catalog: the phone's to answer.
    expect(check('nope', {}, { 'mcp-param-region': 'eu' })).toEqual({ timeoutMs: 600_000 });
    expect(checkToolHeaders(undefined, 'tools/call', { name: 'where' }, {}, 9, BASE)).toEqual({ timeoutMs: 9 });
  });

  it('gives a call it cannot size at least what any node could size it to', () => {
    const call = { name: 'x', arguments: {} };
    expect(provisionalTimeoutMs({}, 'tools/call', call, BASE)).toBeUndefined();
    expect(provisionalTimeoutMs({ 'mcp-param-timeout': '100' }, 'tools/call', call, BASE)).toBe(115_000);
    expect(provisionalTimeoutMs({ 'mcp-param-timeout-ms': '1000' }, 'tools/call', call, BASE)).toBe(BASE);
    expect(
      provisionalTimeoutMs({ 'mcp-param-timeout': '1', 'mcp-param-timeout-ms': '60000' }, 'tools/call', call, BASE),
    ).toBe(75_000);
    // The body's size when it is longer (wait_for_events' timeout_s).
    const wait = { name: 'wait_for_events', arguments: { timeout_s: 300 } };
    expect(provisionalTimeoutMs({ 'mcp-param-timeout': '1' }, 'tools/call', wait, BASE)).toBe(315_000);
  });

  it('carries the headers across the bus in the request header, read back by JSON.parse', () => {
    const h: ReqHeader = {
      t: 'req',
      from: 'n1',
      rid: 3,
      deviceId: 'd',
      epoch: 1,
      id: 7,
      method: 'tools/call',
      scopes: ['devices:read'],
      tokenId: 'k',
      timeoutMs: 30_000,
      ph: { 'mcp-param-region': 'eu "west"' },
    };
    const m = decodeNodeMessage<Header>(Buffer.from(encode(h, '{"name":"where"}')));
    expect(m.header).toMatchObject({ t: 'req', rid: 3, ph: { 'mcp-param-region': 'eu "west"' } });
    expect(m.payload.toString()).toBe('{"name":"where"}');
  });
});
