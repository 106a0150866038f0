import { describe, expect, it } from 'vitest';
import { validateParamHeaders, xMcpHeaders } from './tool-headers.ts';

describe('Mcp-Param-* headers', () => {
  const schema = {
    type: 'object',
    properties: {
      region: { type: 'string', 'x-mcp-header': 'Region' },
      count: { type: 'integer', 'x-mcp-header': 'Count' },
      dry: { type: 'boolean', 'x-mcp-header': 'Dry' },
      target: { type: 'object', properties: { id: { type: 'string', 'x-mcp-header': 'Target-Id' } } },
      query: { type: 'string' },
    },
  };
  it('finds annotations reachable through properties', () => {
    const r = xMcpHeaders(schema);
    expect(r.ok && r.params.map((p) => `${p.header}=${p.path.join('.')}`)).toEqual([
      'Region=region',
      'Count=count',
      'Dry=dry',
      'Target-Id=target.id',
    ]);
  });
  it('declares invalid definitions invalid', () => {
    expect(xMcpHeaders({ type: 'object', properties: { a: { type: 'number', 'x-mcp-header': 'A' } } }).ok).toBe(false);
    expect(
      xMcpHeaders({
        type: 'object',
        properties: { a: { type: 'string', 'x-mcp-header': 'A' }, b: { type: 'string', 'x-mcp-header': 'a' } },
      }).ok,
    ).toBe(false);
    expect(xMcpHeaders({ type: 'object', properties: { a: { type: 'string', 'x-mcp-header': 'has space' } } }).ok).toBe(
      false,
    );
    expect(
      xMcpHeaders({
        type: 'object',
        properties: { a: { type: 'array', items: { type: 'string', 'x-mcp-header': 'A' } } },
      }).ok,
    ).toBe(false);
    expect(
      xMcpHeaders({ type: 'object', anyOf: [{ properties: { a: { type: 'string', 'x-mcp-header': 'A' } } }] }).ok,
    ).toBe(false);
  });
  it('accepts matching headers, integers compared numerically', () => {
    const h = {
      'mcp-param-region': 'us-west1',
      'Mcp-Param-Count': '42.0',
      'mcp-param-dry': 'true',
      'mcp-param-target-id': '=?base64?w6k=?=',
    };
    expect(
      validateParamHeaders(schema, h, { region: 'us-west1', count: 42, dry: true, target: { id: 'é' }, query: 'q' }),
    ).toEqual({ ok: true });
    expect(validateParamHeaders(schema, {}, { query: 'only' })).toEqual({ ok: true });
    expect(validateParamHeaders(schema, {}, { region: null })).toEqual({ ok: true });
  });
  it('rejects missing, different, extra and malformed headers with 400 / -32020', () => {
    const bad = [
      validateParamHeaders(schema, {}, { region: 'us-west1' }),
      validateParamHeaders(schema, { 'mcp-param-region': 'eu' }, { region: 'us-west1' }),
      validateParamHeaders(schema, { 'mcp-param-region': 'us-west1' }, {}),
      validateParamHeaders(schema, { 'mcp-param-count': '43' }, { count: 42 }),
      validateParamHeaders(schema, { 'mcp-param-dry': 'True' }, { dry: true }),
      validateParamHeaders(schema, { 'mcp-param-region': '=?base64?dXM=' }, { region: 'us' }),
      validateParamHeaders(schema, { 'mcp-param-region': '=?base64?d@M=?=' }, { region: 'us' }),
    ];
    for (const r of bad) expect(r).toMatchObject({ ok: false, status: 400, error: { code: -32020 } });
  });
  it('ignores Mcp-Param headers the tool does not declare', () => {
    expect(validateParamHeaders({ type: 'object', properties: {} }, { 'mcp-param-other': 'x' }, {})).toEqual({
      ok: true,
    });
  });
});
