// The /api/v1 route table: each route names the zod schemas its handler validates with, and the
// OpenAPI document (openapi.ts) is generated from the same table, so the two cannot drift
// (docs/decisions/0175-api-v1.md).
import { Buffer } from 'node:buffer';
import { z } from 'zod';

export type Method = 'get' | 'post' | 'patch' | 'delete';

/** A JSON error with a stable code (`{"error": code, "message": …}`), the relay's HTTP error shape. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A key the hub or the store has revoked: the server's refusal at a request's start, and a wait's at each wake-up. */
export const keyRevoked = () => new ApiError(401, 'unauthorized', 'the key was revoked');

/** A locked account (the server's refusal at a request's start, and a wait's at each wake-up). */
export const subscriptionRequired = () =>
  new ApiError(402, 'subscription_required', 'the account has no active subscription; pairings and keys are kept');

/** The status each route-specific error code is answered with (the OpenAPI document lists them under it). */
export const ERROR_STATUS: Record<string, number> = {
  bad_selector: 400,
  bad_label: 400,
  bad_cursor: 400,
  insufficient_scope: 403,
  account_key_required: 403,
  limit_reached: 403,
  device_not_found: 404,
  allocation_not_found: 404,
  key_not_found: 404,
  enrollment_not_found: 404,
  no_device_available: 409,
};

export const ErrorBody = z
  .object({ error: z.string().describe('A stable machine-readable code'), message: z.string() })
  .meta({ id: 'Error' });

export interface RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType, R extends z.ZodType> {
  method: Method;
  /** OpenAPI form: /api/v1/devices/{id}; the uWS pattern is derived (`:id`). */
  path: string;
  operationId: string;
  summary: string;
  params?: P;
  query?: Q;
  body?: B;
  status: number;
  response?: R;
  /** Error codes this route can answer besides the common ones (unauthorized, rate_limited, bad_request). */
  errors?: Record<number, string>;
}

export interface Route<P = unknown, Q = unknown, B = unknown> {
  spec: RouteSpec<z.ZodType, z.ZodType, z.ZodType, z.ZodType>;
  handle(input: { params: P; query: Q; body: B }, caller: unknown): Promise<unknown>;
}

/**
 * The largest request body a route takes; past it the server answers 413 `too_large` before the
 * key is looked at (src/gateway/http.ts `Exchange.body`), and the document lists that answer on
 * every operation with a body (openapi.ts).
 */
export const BODY_LIMIT = 64 * 1024;

/** A request body as JSON: an absent (empty) body is read as `{}`, anything else must parse. */
export function jsonBody(raw: Buffer): unknown {
  if (raw.length === 0) return {};
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError(400, 'bad_request', 'body: not JSON');
  }
}

/**
 * Whether a route's body must be sent: an absent body is read as `{}` (jsonBody), so it is
 * required exactly when the route's schema refuses `{}` (renewing an allocation takes none).
 */
export function bodyRequired(schema: z.ZodType): boolean {
  return !schema.safeParse(jsonBody(Buffer.alloc(0))).success;
}

/** Parses with a schema or throws a 400 naming the first problem. */
export function parseOr400<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const path = issue.path.length ? `${where}.${issue.path.join('.')}` : where;
  throw new ApiError(400, 'bad_request', `${path}: ${issue.message}`);
}
