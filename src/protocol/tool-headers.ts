// Tool parameters mirrored into HTTP headers, revision 2026-07-28 (SEP-2243): a tool's
// inputSchema marks a property with `x-mcp-header`, the client sends its value again as
// `Mcp-Param-{Name}`, and a server that reads the body must check the two agree. Spec:
// docs/specification/2026-07-28/basic/transports/streamable-http ("Custom Headers from Tool
// Parameters") and server/tools ("x-mcp-header"). Pure functions; the /mcp endpoint
// (src/gateway/mcp-stateless.ts) validates with them, or the node holding the phone's catalog
// does (src/gateway/tool-header-check.ts), src/protocol/timeouts.ts sizes a call
// from a declared `Timeout` header, and docs/TOOLS.md lists each tool's headers.
import {
  decodeHeaderValue,
  fieldValue,
  H_PARAM_PREFIX,
  isObject,
  mismatch,
  type Headers,
  type StatelessRejection,
} from './stateless.ts';
import { JsonNumberText, sameJsonNumber, stringifyJson } from './exact-json.ts';

export interface McpHeaderParam {
  /** The name part of `Mcp-Param-{header}`, as the tool declares it. */
  header: string;
  /** The chain of `properties` keys from the schema root. */
  path: string[];
  type: 'string' | 'integer' | 'boolean';
}

const TCHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const COMPOSITION = [
  'items',
  'prefixItems',
  'additionalProperties',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
  '$defs',
  'definitions',
  'patternProperties',
  'dependentSchemas',
];

/**
 * The x-mcp-header annotations of a tool's inputSchema, or why the tool definition is
 * invalid (empty or non-token name, duplicate ignoring case, non-primitive or `number` type,
 * an annotation not reachable through `properties` alone).
 */
export function xMcpHeaders(
  inputSchema: unknown,
): { ok: true; params: McpHeaderParam[] } | { ok: false; reason: string } {
  const params: McpHeaderParam[] = [];
  const seen = new Set<string>();
  let bad: string | undefined;

  const visit = (schema: unknown, path: string[] | undefined): void => {
    if (bad || !isObject(schema)) return;
    if ('x-mcp-header' in schema) {
      const h = schema['x-mcp-header'];
      const type = schema.type;
      if (!path) bad = 'x-mcp-header is not reachable through properties alone';
      else if (typeof h !== 'string' || !TCHAR.test(h)) bad = `x-mcp-header ${JSON.stringify(h)} is not an HTTP token`;
      else if (seen.has(h.toLowerCase())) bad = `x-mcp-header "${h}" is declared twice`;
      else if (type !== 'string' && type !== 'integer' && type !== 'boolean')
        bad = `x-mcp-header "${h}" is on a property of type ${JSON.stringify(type)}`;
      else {
        seen.add(h.toLowerCase());
        params.push({ header: h, path, type });
      }
      if (bad) return;
    }
    const props = schema.properties;
    if (isObject(props)) for (const [k, v] of Object.entries(props)) visit(v, path ? [...path, k] : undefined);
    for (const key of COMPOSITION) {
      const sub = schema[key];
      if (Array.isArray(sub)) sub.forEach((s) => visit(s, undefined));
      else if (isObject(sub)) {
        if (key === '$defs' || key === 'definitions' || key === 'patternProperties' || key === 'dependentSchemas')
          for (const v of Object.values(sub)) visit(v, undefined);
        else visit(sub, undefined);
      }
    }
  };
  visit(inputSchema, []);
  return bad ? { ok: false, reason: bad } : { ok: true, params };
}

function valueAt(args: unknown, path: string[]): unknown {
  let v: unknown = args;
  for (const k of path) {
    if (!isObject(v)) return undefined;
    v = v[k];
  }
  return v;
}

/**
 * "Any server that processes the message body MUST validate that encoded header values,
 * after decoding if Base64-encoded, match the corresponding values in the request body",
 * with 400 / -32020 on any failure:
 * - a value present (not null) in the arguments needs its `Mcp-Param-{Name}` header;
 * - a header must decode (strict Base64 sentinel) and equal the value as a string
 *   (integers compared numerically, booleans as "true"/"false");
 * - a header for a declared parameter whose value is absent or null is a mismatch.
 * Headers the tool does not declare are not the server's business ("forward it and
 * otherwise ignore it"). A tool whose annotations are invalid declares nothing.
 */
export function validateParamHeaders(
  toolInputSchema: unknown,
  headers: Headers,
  args: unknown,
): { ok: true } | ({ ok: false } & StatelessRejection) {
  const decl = xMcpHeaders(toolInputSchema);
  if (!decl.ok) return { ok: true };
  for (const p of decl.params) {
    const name = `Mcp-Param-${p.header}`;
    const raw = fieldValue(headers, `${H_PARAM_PREFIX}${p.header.toLowerCase()}`);
    const value = valueAt(args, p.path);
    if (value === undefined || value === null) {
      if (raw !== undefined) return { ok: false, ...mismatch(`${name} header is present but the argument is absent`) };
      continue;
    }
    if (raw === undefined)
      return { ok: false, ...mismatch(`${name} header is required: the argument is present in the body`) };
    const decoded = decodeHeaderValue(raw);
    if (!decoded.ok) return { ok: false, ...mismatch(`${name} header ${decoded.reason}`) };
    if (!paramMatches(p.type, decoded.value, value)) {
      return {
        ok: false,
        ...mismatch(`${name} header value '${decoded.value}' does not match body value ${stringifyJson(value)}`),
      };
    }
  }
  return { ok: true };
}

function paramMatches(type: McpHeaderParam['type'], headerValue: string, bodyValue: unknown): boolean {
  if (typeof bodyValue === 'string') return headerValue === bodyValue;
  if (typeof bodyValue === 'boolean') return headerValue === String(bodyValue);
  // A number no double holds, as the client wrote it: compared as decimals, not as doubles.
  if (bodyValue instanceof JsonNumberText)
    return type === 'string' ? headerValue === bodyValue.text : sameJsonNumber(headerValue.trim(), bodyValue.text);
  if (typeof bodyValue === 'number') {
    if (type === 'string' || headerValue.trim() === '') return headerValue === String(bodyValue);
    const n = Number(headerValue);
    return Number.isFinite(n) && n === bodyValue;
  }
  return false;
}
