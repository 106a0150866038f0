// Tool schemas every major model provider accepts (docs/decisions/0180-portable-tool-schemas.md).
// Pure: `portableSchema` rewrites what zod emits into the common subset, `portabilityViolations`
// says where a schema leaves it. The phone serves only rewritten schemas (server.ts), and
// src/device/tools/portable.test.ts walks the served catalog with the checker.

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Schema = { [k: string]: Json };

/** The JSON Schema keywords the subset allows; anything else is a violation. */
const ALLOWED = new Set([
  '$schema',
  'type',
  'description',
  'title',
  'default',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'minItems',
  'maxItems',
  'enum',
  'const',
  'anyOf',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  // MCP's own annotation (SEP-2243): the client reads it and mirrors the value into a header.
  'x-mcp-header',
]);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
/** An enum longer than this is a list of data, not a choice; providers cap enum sizes. */
export const MAX_ENUM = 64;
/** Keywords that say nothing about the value and so belong to the whole of a rewritten schema. */
const ANNOTATIONS = new Set(['description', 'title', 'default', '$schema']);

const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The same schema in the subset, where a mechanical rewrite says the same thing:
 * `type: [T, "null"]` becomes `anyOf: [{type: T, …}, {type: "null"}]`, `oneOf` becomes `anyOf`
 * (zod writes oneOf only for discriminated unions, whose branches never overlap), and
 * `propertyNames: {type: "string"}` (true of every JSON object) is dropped.
 */
export function portableSchema<T>(schema: T): T {
  return rewrite(schema as Json) as T;
}

function rewrite(node: Json): Json {
  if (Array.isArray(node)) return node.map(rewrite);
  if (!isSchema(node)) return node;
  const out: Schema = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'properties' && isSchema(v)) {
      out.properties = Object.fromEntries(Object.entries(v).map(([name, sub]) => [name, rewrite(sub)]));
    } else if (k === 'oneOf') out.anyOf = rewrite(v);
    else if (k === 'propertyNames' && isSchema(v) && v.type === 'string' && Object.keys(v).length === 1) continue;
    else out[k] = rewrite(v);
  }
  if (Array.isArray(out.type)) {
    const types = out.type as string[];
    const kept: Schema = {};
    const rest: Schema = {};
    for (const [k, v] of Object.entries(out)) if (k !== 'type') (ANNOTATIONS.has(k) ? kept : rest)[k] = v;
    // Constraints apply to the non-null branch only; null takes none of them.
    kept.anyOf = types.map((t) => (t === 'null' ? { type: 'null' } : { type: t, ...rest }));
    return kept;
  }
  return out;
}

export interface Violation {
  /** A JSON pointer-like path inside the schema, e.g. `/properties/result/anyOf/0`. */
  path: string;
  rule: string;
}

/**
 * Where a schema leaves the subset. `strict`: an input schema, whose objects must all refuse
 * unknown keys (`additionalProperties: false`); outputs may leave it out, never set it to a schema.
 */
export function portabilityViolations(schema: unknown, opts: { strict: boolean }): Violation[] {
  const out: Violation[] = [];
  if (!isSchema(schema) || schema.type !== 'object') out.push({ path: '', rule: 'the root must be type "object"' });
  visit(schema, '', opts.strict, out);
  return out;
}

function visit(node: unknown, path: string, strict: boolean, out: Violation[]): void {
  const bad = (rule: string): void => {
    out.push({ path, rule });
  };
  if (!isSchema(node)) return bad('a schema must be an object (no boolean schemas)');
  for (const k of Object.keys(node)) if (!ALLOWED.has(k)) bad(`keyword "${k}" is outside the portable subset`);
  if (!('type' in node) && !('anyOf' in node) && !('enum' in node) && !('const' in node))
    bad('empty schema: say what the value is (type, anyOf, enum or const)');
  if ('type' in node) {
    if (Array.isArray(node.type)) bad('type arrays are not portable: write anyOf [{type: T}, {type: "null"}]');
    else if (typeof node.type !== 'string' || !TYPES.has(node.type)) bad(`unknown type ${JSON.stringify(node.type)}`);
  }
  if ('enum' in node) {
    const e = node.enum;
    if (!Array.isArray(e) || e.length === 0) bad('enum must be a non-empty array');
    else {
      if (e.length > MAX_ENUM) bad(`enum has ${e.length} values, more than ${MAX_ENUM}`);
      if (!e.every((v) => typeof v === 'string')) bad('enum values must be strings');
      if (new Set(e).size !== e.length) bad('enum values must be unique');
    }
  }
  if ('anyOf' in node) {
    const branches = node.anyOf;
    if (!Array.isArray(branches) || branches.length < 2) bad('anyOf needs at least two branches');
    else branches.forEach((b, i) => visit(b, `${path}/anyOf/${i}`, strict, out));
  }
  if (node.type === 'object') {
    const props = node.properties;
    if (props !== undefined && !isSchema(props)) bad('properties must be an object');
    const ap = node.additionalProperties;
    if (strict && ap !== false) bad('an input object must set additionalProperties: false');
    if (!strict && ap !== undefined && ap !== false) bad('additionalProperties may only be false (no maps)');
    if (!isSchema(props) || Object.keys(props).length === 0) {
      if (!strict || ap !== false) bad('an object must declare its properties');
    } else for (const [name, sub] of Object.entries(props)) visit(sub, `${path}/properties/${name}`, strict, out);
    const req = node.required;
    if (req !== undefined) {
      if (!Array.isArray(req) || !req.every((r) => typeof r === 'string' && isSchema(props) && r in props))
        bad('required must name declared properties');
    }
  }
  if (node.type === 'array') {
    if (!('items' in node)) bad('an array must declare its items');
    else visit(node.items, `${path}/items`, strict, out);
  }
}
