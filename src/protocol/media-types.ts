// What POST /mcp needs of a request's Content-Type and Accept (docs/decisions/0215-post-media-types.md):
// the body must be declared JSON, and the client must take JSON answers. An Accept without
// text/event-stream is served with JSON only (docs/decisions/0015-resumable-post-streams.md).
import { INVALID_REQUEST, type JsonRpcErrorObject } from './errors.ts';

/** A header value as the messages quote it: bounded (a header can be kilobytes). */
function quoted(value: string): string {
  return JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value);
}

/** `type/subtype` of a media type or range, lower case, without parameters. */
export function essence(value: string): string {
  return value.split(';', 1)[0].trim().toLowerCase();
}

/** Content-Type `application/json`, in any case, with any parameters (charset=utf-8). */
export function isJsonContentType(value: string | undefined): boolean {
  return value !== undefined && essence(value) === 'application/json';
}

/**
 * Whether Accept lets the answer be `application/json` (RFC 9110 §12.5.1): no Accept at all
 * accepts anything; otherwise the most specific range that matches (`application/json`, then
 * `application/*`, then `*\/*`) decides, and `q=0` rules the type out.
 */
export function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  let best = -1; // specificity of the matching range found so far
  let q = 0;
  for (const range of accept.split(',')) {
    const type = essence(range);
    const specificity = type === 'application/json' ? 2 : type === 'application/*' ? 1 : type === '*/*' ? 0 : -1;
    if (specificity <= best) continue;
    best = specificity;
    const m = /;\s*q\s*=\s*([0-9.]+)/i.exec(range);
    const weight = m ? Number(m[1]) : 1;
    q = Number.isNaN(weight) ? 1 : weight;
  }
  return best >= 0 && q > 0;
}

const SDK_ACCEPT = 'application/json, text/event-stream';

/** 415 or 406 with the JSON-RPC error that says why, or undefined when the request may go on. */
export function postMediaRefusal(
  contentType: string | undefined,
  accept: string | undefined,
): { status: 415 | 406; error: JsonRpcErrorObject } | undefined {
  // What the official SDK clients send on every call: no parsing on the hot path.
  if (contentType === 'application/json' && (accept === SDK_ACCEPT || accept === 'application/json')) return undefined;
  if (!isJsonContentType(contentType))
    return {
      status: 415,
      error: {
        code: INVALID_REQUEST,
        message: `Unsupported Media Type: POST /mcp takes a JSON-RPC message with Content-Type: application/json; ${
          contentType === undefined ? 'this request has no Content-Type' : `this request's is ${quoted(contentType)}`
        }`,
      },
    };
  if (!acceptsJson(accept))
    return {
      status: 406,
      error: {
        code: INVALID_REQUEST,
        message: `Not Acceptable: POST /mcp answers application/json (and text/event-stream when the client lists it too); this request's Accept is ${quoted(accept!)}`,
      },
    };
  return undefined;
}
