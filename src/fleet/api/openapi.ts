// The OpenAPI 3.1 document of /api/v1, generated from the route table's zod schemas
// (z.toJSONSchema), the same ones the handlers validate with.
import { z } from 'zod';
import type { ApiRoute } from './routes.ts';
import { BODY_LIMIT, bodyRequired, ERROR_STATUS, ErrorBody } from './route.ts';

type Json = Record<string, unknown>;

const COMMON_ERRORS: Record<number, string> = {
  400: 'bad_request: the input does not match the schema',
  401: 'unauthorized: missing or unknown key',
  402: 'subscription_required: the account is locked',
  403: 'fleet_key_required: a device key was used',
  429: 'rate_limited: too many requests from this key',
};

export function openApiDocument(routes: readonly ApiRoute[], serverUrl: string): Json {
  // One registry for every schema with an id, so they land in components/schemas once.
  const components: Json = {};
  // Schemas with an id (`.meta({ id })`) become components; an input form that differs from the
  // output form (defaults make fields optional on input) is kept apart as `<id>Input`.
  const ref = (schema: z.ZodType, io: 'input' | 'output'): Json => {
    const js = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json & {
      $defs?: Record<string, Json>;
    };
    const defs = js.$defs ?? {};
    const names = new Map<string, string>();
    // The definition as it would be stored under its plain id (to compare with what is there).
    const rename0 = (v: Json): Json =>
      JSON.parse(JSON.stringify(v).replace(/"#\/\$defs\/([^"]+)"/g, '"#/components/schemas/$1"')) as Json;
    for (const [id, def] of Object.entries(defs)) {
      const free = components[id] === undefined || JSON.stringify(components[id]) === JSON.stringify(rename0(def));
      names.set(id, free ? id : `${id}${io === 'input' ? 'Input' : 'Output'}`);
    }
    const rename = (v: Json): Json =>
      JSON.parse(
        JSON.stringify(v).replace(
          /"#\/\$defs\/([^"]+)"/g,
          (_m, id: string) => `"#/components/schemas/${names.get(id) ?? id}"`,
        ),
      ) as Json;
    for (const [id, def] of Object.entries(defs)) {
      const name = names.get(id)!;
      if (components[name] === undefined) components[name] = rename(def);
    }
    const rest: Json = {};
    for (const [k, v] of Object.entries(js)) if (k !== '$defs' && k !== '$schema') rest[k] = v;
    return rename(rest);
  };
  /** A top-level object's own schema (parameters list its properties). */
  const inline = (schema: z.ZodType): Json => {
    const top = ref(schema, 'input') as { $ref?: string };
    return top.$ref ? (components[top.$ref.split('/').pop()!] as Json) : top;
  };
  const errorRef = ref(ErrorBody, 'output');
  const paths: Record<string, Record<string, Json>> = {};
  for (const r of routes) {
    const parameters: Json[] = [];
    for (const [where, schema] of [
      ['path', r.params],
      ['query', r.query],
    ] as const) {
      if (!schema) continue;
      const obj = inline(schema) as { properties?: Record<string, Json>; required?: string[] };
      for (const [name, s] of Object.entries(obj.properties ?? {}))
        parameters.push({
          name,
          in: where,
          required: where === 'path' || (obj.required ?? []).includes(name),
          schema: s,
          ...(typeof s.description === 'string' ? { description: s.description } : {}),
        });
    }
    const responses: Record<string, Json> = {};
    responses[String(r.status)] = r.response
      ? { description: r.summary, content: { 'application/json': { schema: ref(r.response, 'output') } } }
      : { description: r.summary };
    const errors = { ...COMMON_ERRORS };
    for (const code of r.errors) {
      const status = ERROR_STATUS[code];
      if (status === undefined) throw new Error(`${r.operationId}: no status for error code ${code}`);
      errors[status] = errors[status] ? `${errors[status]}; ${code}` : code;
    }
    // A body is read up to a limit, and past it answered 413 before anything else (server.ts).
    if (r.body) errors[413] = `too_large: the body exceeds ${BODY_LIMIT} bytes`;
    for (const [status, text] of Object.entries(errors))
      responses[status] = { description: text, content: { 'application/json': { schema: errorRef } } };
    // The scope a route needs is the security requirement's role (OpenAPI 3.1 allows role names
    // for any scheme type), and said in words for readers of the document; a rule that depends on
    // the request (scopeRule) is said in words only.
    const roles = r.scope ? [r.scope] : [];
    const needs = [...(r.scope ? [`the ${r.scope} scope`] : []), ...(r.scopeRule ? [r.scopeRule] : [])];
    (paths[r.path] ??= {})[r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      ...(needs.length
        ? { description: `Needs a fleet key with ${needs.join(' and ')} (403 insufficient_scope otherwise).` }
        : {}),
      security: [{ bearer: roles }, { apiKey: roles }],
      ...(parameters.length ? { parameters } : {}),
      ...(r.body
        ? {
            requestBody: {
              required: bodyRequired(r.body),
              content: { 'application/json': { schema: ref(r.body, 'input') } },
            },
          }
        : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'phonebridge fleet API',
      version: '1',
      description:
        'Phones, allocations, keys and enrollment codes of the account a fleet key belongs to. Errors are {"error": code, "message": text} with stable codes.',
    },
    servers: [{ url: serverUrl }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A fleet key (pbf_…)' },
        apiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'A fleet key (pbf_…)' },
      },
    },
  };
}
