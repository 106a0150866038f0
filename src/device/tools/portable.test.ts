// The portable-schema rule (docs/decisions/0180-portable-tool-schemas.md) over the catalog the
// phone actually serves, and the checker itself on schemas that break each part of the rule.
import { describe, expect, it } from 'vitest';
import { SimPhone } from '../sim/model.ts';
import { connect } from './in-memory.ts';
import { MAX_ENUM, portabilityViolations, portableSchema } from './portable.ts';

describe('served tool schemas', () => {
  it('every inputSchema and outputSchema is in the portable subset', async () => {
    const client = await connect({ phone: new SimPhone(), deviceId: 'p' });
    const { tools } = await client.listTools();
    await client.close();
    expect(tools.length).toBeGreaterThan(10);
    const found = tools.flatMap((t) => [
      ...portabilityViolations(t.inputSchema, { strict: true }).map((v) => `${t.name} input${v.path}: ${v.rule}`),
      ...(t.outputSchema
        ? portabilityViolations(t.outputSchema, { strict: false }).map((v) => `${t.name} output${v.path}: ${v.rule}`)
        : [`${t.name}: no outputSchema`]),
    ]);
    expect(found).toEqual([]);
  });

  it('the rewrite keeps what the schema means: nullable values stay nullable, constraints stay on the value', async () => {
    const client = await connect({ phone: new SimPhone(), deviceId: 'p' });
    const { tools } = await client.listTools();
    await client.close();
    const outcome = tools.find((t) => t.name === 'get_outcome')!.outputSchema as {
      properties: Record<string, { anyOf?: Array<{ type?: string; anyOf?: unknown[] }> }>;
    };
    expect(outcome.properties.tool.anyOf).toEqual([{ type: 'string' }, { type: 'null' }]);
    // A replayed result is an act result or a run, never an open map.
    const result = outcome.properties.result.anyOf!;
    expect(result.map((b) => b.type ?? 'union')).toEqual(['union', 'null']);
    expect(result[0].anyOf).toHaveLength(2);
  });
});

describe('portabilityViolations', () => {
  const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    type: 'object',
    properties,
    additionalProperties: false,
    ...extra,
  });
  const rules = (schema: unknown, strict = true) => portabilityViolations(schema, { strict }).map((v) => v.rule);

  it('accepts a clean schema', () => {
    expect(rules(obj({ a: { type: 'string' }, b: { anyOf: [{ type: 'integer' }, { type: 'null' }] } }))).toEqual([]);
  });
  it('refuses type arrays', () => {
    expect(rules(obj({ a: { type: ['string', 'null'] } }))).toEqual([expect.stringContaining('type arrays')]);
  });
  it('refuses empty schemas, also as additionalProperties', () => {
    expect(rules(obj({ a: {} }))).toEqual([expect.stringContaining('empty schema')]);
    expect(rules({ type: 'object', properties: { a: { type: 'string' } }, additionalProperties: {} }, false)).toEqual([
      expect.stringContaining('additionalProperties may only be false'),
    ]);
  });
  it('wants additionalProperties: false on every input object, nested ones too', () => {
    expect(rules(obj({ a: { type: 'object', properties: { b: { type: 'string' } } } }))).toEqual([
      expect.stringContaining('additionalProperties: false'),
    ]);
    expect(rules({ type: 'object', properties: { b: { type: 'string' } } }, false)).toEqual([]);
  });
  it('bounds enums', () => {
    const many = Array.from({ length: MAX_ENUM + 1 }, (_, i) => `v${i}`);
    expect(rules(obj({ a: { type: 'string', enum: many } }))).toEqual([expect.stringContaining('more than')]);
    expect(rules(obj({ a: { type: 'string', enum: [] } }))).toEqual([expect.stringContaining('non-empty')]);
    expect(rules(obj({ a: { enum: [1, 2] } }))).toEqual([expect.stringContaining('strings')]);
  });
  it('refuses keywords outside the subset', () => {
    expect(rules(obj({ a: { oneOf: [{ type: 'string' }, { type: 'null' }] } }))).toContainEqual(
      expect.stringContaining('"oneOf"'),
    );
    expect(rules(obj({ a: { type: 'number', exclusiveMinimum: 0 } }))).toEqual([
      expect.stringContaining('"exclusiveMinimum"'),
    ]);
  });
  it('refuses arrays without items and a root that is not an object', () => {
    expect(rules(obj({ a: { type: 'array' } }))).toEqual([expect.stringContaining('items')]);
    expect(rules({ type: 'string' })).toEqual([expect.stringContaining('root')]);
  });
});

describe('portableSchema', () => {
  it('rewrites type arrays into anyOf with the constraints on the value branch', () => {
    expect(portableSchema({ description: 'd', type: ['string', 'null'], maxLength: 3 })).toEqual({
      description: 'd',
      anyOf: [{ type: 'string', maxLength: 3 }, { type: 'null' }],
    });
  });
  it('turns oneOf into anyOf and drops propertyNames {type: string}', () => {
    expect(
      portableSchema({
        type: 'object',
        properties: { s: { oneOf: [{ const: 'a' }, { const: 'b' }] } },
        propertyNames: { type: 'string' },
      }),
    ).toEqual({ type: 'object', properties: { s: { anyOf: [{ const: 'a' }, { const: 'b' }] } } });
  });
});
