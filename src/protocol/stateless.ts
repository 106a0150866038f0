/**
 * Revision 2026-07-28 ("stateless", "modern") as pure functions the /mcp endpoint calls.
 * No I/O. Spec: `modelcontextprotocol/modelcontextprotocol`, docs/specification/2026-07-28/
 * (basic/index, basic/versioning, basic/transports/streamable-http, basic/patterns/*,
 * server/discover, server/utilities/caching, changelog) and schema/2026-07-28/schema.ts.
 * The rules as they apply to the relay are summarised in docs/PROTOCOL.md ("Revision 2026-07-28").
 *
 * API
 * - classifyEra(headers, body)            'stateless' | 'session' for one HTTP request
 * - validateStatelessRequest(headers, msg) ok (method, name, version, meta) or {status, error}
 * - decodeHeaderValue / encodeHeaderValue the "=?base64?…?=" sentinel encoding
 * Tool parameters mirrored into Mcp-Param-* headers (x-mcp-header): ./tool-headers.ts.
 * - discoverResult(cachedInit)            server/discover from the phone's initialize result
 * - finishStatelessResult(method, result) / finishStatelessResultFrame(method, frame)
 *                                         the fields a 2026-07-28 result must carry
 * - listenNotAcceptable, parseSubscriptionFilter, acknowledgeSubscription,
 *   subscriptionNotification, subscriptionClosedResult
 *                                         subscriptions/listen
 * - shouldForwardLog(meta, notification)  notifications/message only when asked for
 */
import { Buffer } from 'node:buffer';
import { OPEN_OBJ, scanObject, skipWs, type Span } from './json-bytes.ts';
import { INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, type JsonRpcErrorObject } from './errors.ts';
import type { JsonRpcId } from './jsonrpc.ts';
import { SESSION_REVISIONS, STATELESS_REVISIONS } from './revisions.ts';
import { parseJson, stringifyJson } from './exact-json.ts';

// ---------------------------------------------------------------------------------------
// Names and codes (schema/2026-07-28/schema.ts)

export const STATELESS_REVISION = '2026-07-28';

export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
export const META_SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/** HTTP headers are case-insensitive; these are the lower-case names the functions read. */
export const H_PROTOCOL_VERSION = 'mcp-protocol-version';
export const H_METHOD = 'mcp-method';
export const H_NAME = 'mcp-name';
export const H_SESSION_ID = 'mcp-session-id';
export const H_PARAM_PREFIX = 'mcp-param-';

/** -32020: headers do not match the body, or a required header is missing or malformed. */
export const HEADER_MISMATCH = -32020;
/** -32021: the request needs a client capability the client did not declare. */
export const MISSING_REQUIRED_CLIENT_CAPABILITY = -32021;
/** -32022: data {supported: string[], requested: string}. */
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;

/**
 * Every protocol version the relay speaks, for UnsupportedProtocolVersionError.data.supported
 * (the spec's own example lists both eras: ["2026-07-28", "2025-11-25"]).
 */
export const SUPPORTED_VERSIONS: readonly string[] = [...STATELESS_REVISIONS, ...SESSION_REVISIONS];

/**
 * The client requests of 2026-07-28 (schema ClientRequest). Everything else, notably the
 * removed `initialize`, `ping`, `logging/setLevel`, `resources/subscribe` and
 * `resources/unsubscribe`, is 404 / -32601 on the stateless path.
 */
export const STATELESS_METHODS = [
  'server/discover',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'subscriptions/listen',
  // The tasks extension (SEP-2663, docs/decisions/0183-tasks-extension.md): no tasks/result or
  // tasks/list in this revision.
  'tasks/get',
  'tasks/update',
  'tasks/cancel',
] as const;
export type StatelessMethod = (typeof STATELESS_METHODS)[number];

/**
 * Methods whose body names what they act on: they need `Mcp-Name` (params.name or params.uri,
 * SEP-2243; params.taskId for the tasks extension's methods, SEP-2663 "Routing Headers").
 */
export const NAMED_METHODS: Readonly<Record<string, 'name' | 'uri' | 'taskId'>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** The tasks extension's identifier (SEP-2663), in capabilities.extensions of both sides. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** The methods the tasks extension defines (the ones a client must have declared it for). */
export const TASK_METHODS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

/** Results of these carry ttlMs and cacheScope (server/utilities/caching). */
export const CACHEABLE_METHODS: ReadonlySet<string> = new Set([
  'server/discover',
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
]);

export type Headers = Readonly<Record<string, string | undefined>>;

function header(h: Headers, name: string): string | undefined {
  const direct = h[name];
  if (direct !== undefined) return direct;
  for (const k of Object.keys(h)) if (k.toLowerCase() === name) return h[k];
  return undefined;
}

/** RFC 9110 §5.5: a field value excludes leading and trailing optional whitespace. */
export function fieldValue(h: Headers, name: string): string | undefined {
  const v = header(h, name);
  return v === undefined ? undefined : v.replace(/^[ \t]+|[ \t]+$/g, '');
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isSessionRevision(v: unknown): boolean {
  return typeof v === 'string' && (SESSION_REVISIONS as readonly string[]).includes(v);
}

function metaOf(message: unknown): Record<string, unknown> | undefined {
  if (!isObject(message) || !isObject(message.params)) return undefined;
  const meta = message.params._meta;
  return isObject(meta) ? meta : undefined;
}

// ---------------------------------------------------------------------------------------
// Era selection (basic/versioning "Backward Compatibility with Initialization-Based Versions")

export type Era = 'stateless' | 'session';

/**
 * Which era serves this HTTP request. A dual-era server "selects its behavior from how the
 * client opens: a request carrying modern per-request `_meta` is served statelessly; an
 * `initialize` request selects legacy semantics, scoped to the session". In order:
 *
 * 1. A batch (array body) is session era: batches exist only in 2025-03-26.
 * 2. `params._meta["io.modelcontextprotocol/protocolVersion"]` present: stateless unless it
 *    names a session revision (then the client is a legacy client that happens to send the
 *    key). `initialize` carrying a modern `_meta` is stateless too, and so gets 404.
 * 3. `initialize` without it: session.
 * 4. `Mcp-Session-Id` present: session.
 * 5. `MCP-Protocol-Version` present and not a session revision (`2026-07-28`, or an unknown
 *    version such as `1900-01-01`): stateless, so the client gets a modern error
 *    (-32602 / -32020 / -32022) it can recognise instead of a legacy 400.
 * 6. Otherwise session (no header is taken as 2025-03-26, as the spec allows).
 *
 * With `body` undefined only rules 4–6 apply. The endpoint classifies GET and DELETE with
 * getOrDeleteEra (./revisions.ts) instead: rules 4–6, except that a version that is no session
 * revision never reaches a session (2026-07-28 is 405 with Mcp-Session-Id too, another version
 * with it 400).
 */
export function classifyEra(headers: Headers, body: unknown): Era {
  if (Array.isArray(body)) return 'session';
  const metaVersion = metaOf(body)?.[META_PROTOCOL_VERSION];
  if (metaVersion !== undefined) return isSessionRevision(metaVersion) ? 'session' : 'stateless';
  if (isObject(body) && body.method === 'initialize') return 'session';
  if (fieldValue(headers, H_SESSION_ID)) return 'session';
  const hv = fieldValue(headers, H_PROTOCOL_VERSION);
  if (hv && !isSessionRevision(hv)) return 'stateless';
  return 'session';
}

// ---------------------------------------------------------------------------------------
// Header value encoding (streamable-http "Value Encoding")

const SENTINEL = /^=\?base64\?(.*)\?=$/s;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** Visible ASCII, space and tab (RFC 9110 field-value characters). */
const PLAIN_SAFE = /^[\x20-\x7e\t]*$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A header value as the body value it stands for: the "=?base64?…?=" sentinel is decoded
 * (strict Base64, UTF-8); anything else must be plain visible ASCII.
 */
export function decodeHeaderValue(raw: string): { ok: true; value: string } | { ok: false; reason: string } {
  const m = SENTINEL.exec(raw);
  if (!m) {
    if (!PLAIN_SAFE.test(raw)) return { ok: false, reason: 'contains characters outside visible ASCII' };
    return { ok: true, value: raw };
  }
  const b64 = m[1];
  if (!BASE64.test(b64)) return { ok: false, reason: 'invalid Base64 in =?base64?…?= value' };
  try {
    return { ok: true, value: utf8.decode(Buffer.from(b64, 'base64')) };
  } catch {
    return { ok: false, reason: 'Base64 value is not UTF-8' };
  }
}

/** What a client sends for a value: plain when safe, else the Base64 sentinel. */
export function encodeHeaderValue(value: string): string {
  const plainOk = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(value) && !SENTINEL.test(value);
  return plainOk || value === '' ? value : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

// ---------------------------------------------------------------------------------------
// Request validation (basic/index "_meta", streamable-http "Request Metadata", "Server Validation")

export interface StatelessRejection {
  /** HTTP status: 400 for every validation failure, 404 for an unknown method. */
  status: 400 | 404;
  error: JsonRpcErrorObject;
}

export interface StatelessRequestInfo {
  method: string;
  /** params.name, params.uri or params.taskId for the methods of NAMED_METHODS. */
  name?: string;
  protocolVersion: string;
  meta: Record<string, unknown>;
}

export interface StatelessOptions {
  /** Versions served statelessly. Default: ["2026-07-28"]. */
  statelessVersions?: readonly string[];
  /** Listed in -32022 data.supported. Default: SUPPORTED_VERSIONS (both eras). */
  supportedVersions?: readonly string[];
  /** Methods served. Default: STATELESS_METHODS. */
  methods?: readonly string[];
}

/** 400 / -32020 HeaderMismatch, with the message the spec asks for. */
export function mismatch(message: string): StatelessRejection {
  return { status: 400, error: { code: HEADER_MISMATCH, message: `Header mismatch: ${message}` } };
}

/**
 * Checks one stateless JSON-RPC request (already classified as a request) against its
 * headers. The order is chosen so each client mistake gets the error the spec names for it:
 *
 * 1. `_meta` with `protocolVersion` (string) and `clientCapabilities` (object) → else 400 / -32602.
 *    `clientInfo` is a SHOULD and is not required.
 * 2. `MCP-Protocol-Version` present and equal to the `_meta` version → else 400 / -32020.
 * 3. The version is served statelessly → else 400 / -32022 with data {supported, requested}.
 * 4. `Mcp-Method` present and equal to `method` (values are case-sensitive) → else 400 / -32020.
 * 5. The method exists in 2026-07-28 → else 404 / -32601.
 * 6. tools/call, prompts/get, resources/read, tasks/get|update|cancel: `Mcp-Name` present,
 *    decoded, equal to params.name / params.uri / params.taskId → else 400 / -32020.
 *
 * The caller answers a rejection with `errorResponse(request.id, rejection.error)`: every
 * error carries the request's id.
 */
export function validateStatelessRequest(
  headers: Headers,
  message: { method: string; params?: Record<string, unknown> },
  opts: StatelessOptions = {},
): { ok: true; info: StatelessRequestInfo } | ({ ok: false } & StatelessRejection) {
  const fail = (r: StatelessRejection) => ({ ok: false as const, ...r });
  const meta = metaOf(message);
  if (!meta)
    return fail({ status: 400, error: { code: INVALID_PARAMS, message: 'Invalid params: params._meta is required' } });
  const version = meta[META_PROTOCOL_VERSION];
  if (typeof version !== 'string' || version === '') {
    return fail({
      status: 400,
      error: { code: INVALID_PARAMS, message: `Invalid params: _meta["${META_PROTOCOL_VERSION}"] is required` },
    });
  }
  if (!isObject(meta[META_CLIENT_CAPABILITIES])) {
    return fail({
      status: 400,
      error: { code: INVALID_PARAMS, message: `Invalid params: _meta["${META_CLIENT_CAPABILITIES}"] is required` },
    });
  }

  const hv = fieldValue(headers, H_PROTOCOL_VERSION);
  if (hv === undefined || hv === '') return fail(mismatch('MCP-Protocol-Version header is required'));
  if (hv !== version)
    return fail(mismatch(`MCP-Protocol-Version header value '${hv}' does not match body value '${version}'`));

  const stateless = opts.statelessVersions ?? STATELESS_REVISIONS;
  if (!stateless.includes(version)) {
    return fail({
      status: 400,
      error: {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        message: 'Unsupported protocol version',
        data: { supported: [...(opts.supportedVersions ?? SUPPORTED_VERSIONS)], requested: version },
      },
    });
  }

  const hm = fieldValue(headers, H_METHOD);
  if (hm === undefined || hm === '') return fail(mismatch('Mcp-Method header is required'));
  if (hm !== message.method)
    return fail(mismatch(`Mcp-Method header value '${hm}' does not match body value '${message.method}'`));

  const methods = opts.methods ?? STATELESS_METHODS;
  if (!methods.includes(message.method)) {
    return fail({ status: 404, error: { code: METHOD_NOT_FOUND, message: `Method not found: ${message.method}` } });
  }

  const info: StatelessRequestInfo = { method: message.method, protocolVersion: version, meta };
  const field = NAMED_METHODS[message.method];
  if (field) {
    const bodyValue = message.params?.[field];
    if (typeof bodyValue !== 'string') {
      return fail({
        status: 400,
        error: { code: INVALID_PARAMS, message: `Invalid params: params.${field} must be a string` },
      });
    }
    const raw = fieldValue(headers, H_NAME);
    if (raw === undefined || raw === '') return fail(mismatch('Mcp-Name header is required'));
    const decoded = decodeHeaderValue(raw);
    if (!decoded.ok) return fail(mismatch(`Mcp-Name header ${decoded.reason}`));
    if (decoded.value !== bodyValue)
      return fail(mismatch(`Mcp-Name header value '${decoded.value}' does not match body value '${bodyValue}'`));
    info.name = bodyValue;
  }
  return { ok: true, info };
}

// ---------------------------------------------------------------------------------------
// server/discover (server/discover.mdx, DiscoverResult)

export interface DiscoverOptions {
  supportedVersions?: readonly string[];
  /** Freshness hint for the discover result. Default 0: the phone's cache can change on reconnect. */
  ttlMs?: number;
}

/**
 * The relay answers `server/discover` itself from the phone's cached `initialize` result
 * (docs/decisions/0013-stateless-revision-2026-07-28.md). Mapping: capabilities ← capabilities (unchanged; `logging` is deprecated but
 * still a field), instructions ← instructions, `_meta["io.modelcontextprotocol/serverInfo"]`
 * ← serverInfo, supportedVersions ← the versions the relay serves statelessly,
 * plus resultType "complete", ttlMs, cacheScope "private" (the answer depends on the
 * credential's device). protocolVersion is dropped: it was the session's, not the client's.
 */
export function discoverResult(cachedInitializeResult: unknown, opts: DiscoverOptions = {}): Record<string, unknown> {
  const init = isObject(cachedInitializeResult) ? cachedInitializeResult : {};
  const out: Record<string, unknown> = {
    resultType: 'complete',
    supportedVersions: [...(opts.supportedVersions ?? STATELESS_REVISIONS)],
    capabilities: discoveredCapabilities(init.capabilities),
  };
  if (typeof init.instructions === 'string') out.instructions = init.instructions;
  const meta: Record<string, unknown> = isObject(init._meta) ? { ...init._meta } : {};
  if (isObject(init.serverInfo)) meta[META_SERVER_INFO] = init.serverInfo;
  if (Object.keys(meta).length > 0) out._meta = meta;
  out.ttlMs = opts.ttlMs ?? 0;
  out.cacheScope = 'private';
  return out;
}

/**
 * The phone's capabilities as this revision shows them: without the 2025-11-25 `tasks` slot,
 * which the tasks extension replaces ("MUST NOT continue to advertise the legacy capabilities
 * under any protocol version that includes this extension"; its methods tasks/result and
 * tasks/list do not exist here). A phone that has tasks for this revision says so under
 * `extensions["io.modelcontextprotocol/tasks"]`, which is kept.
 */
function discoveredCapabilities(capabilities: unknown): Record<string, unknown> {
  if (!isObject(capabilities)) return {};
  if (!('tasks' in capabilities)) return capabilities;
  const { tasks: _legacy, ...rest } = capabilities;
  return rest;
}

// ---------------------------------------------------------------------------------------
// Tasks extension (SEP-2663; docs/decisions/0183-tasks-extension.md)

/** Whether a request's per-request client capabilities declare the tasks extension. */
export function declaresTasks(meta: Record<string, unknown> | undefined): boolean {
  const caps = meta?.[META_CLIENT_CAPABILITIES];
  const ext = isObject(caps) ? caps.extensions : undefined;
  return isObject(ext) && isObject(ext[TASKS_EXTENSION]);
}

/**
 * tasks/get, tasks/update, tasks/cancel on this revision: the phone must advertise the
 * extension (else 404 / -32601, as for any method it does not offer), and the client must have
 * declared it on this request (else 400 / -32021 naming the extension: "Servers MUST return this
 * error for non-declaring clients issuing tasks/get, tasks/update, and tasks/cancel").
 * Any other method passes.
 */
export function checkTaskMethod(
  method: string,
  meta: Record<string, unknown> | undefined,
  phoneCapabilities: unknown,
): { ok: true } | ({ ok: false } & StatelessRejection) {
  if (!TASK_METHODS.has(method)) return { ok: true };
  const ext = isObject(phoneCapabilities) ? phoneCapabilities.extensions : undefined;
  if (!isObject(ext) || !isObject(ext[TASKS_EXTENSION]))
    return {
      ok: false,
      status: 404,
      error: { code: METHOD_NOT_FOUND, message: `Method not found: the phone does not offer ${TASKS_EXTENSION}` },
    };
  if (!declaresTasks(meta))
    return {
      ok: false,
      status: 400,
      error: {
        code: MISSING_REQUIRED_CLIENT_CAPABILITY,
        message: `Missing required client capability: ${method} needs the ${TASKS_EXTENSION} extension in _meta["${META_CLIENT_CAPABILITIES}"].extensions`,
        data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
      },
    };
  return { ok: true };
}

/**
 * The params of a tools/call as they go to the phone: without the 2025-11-25 `task` member.
 * This revision removed it ("servers MUST ignore it … rather than using it as an opt-in"), and
 * the phone, spoken to in 2025-11-25 framing, would take it as a request to run a task.
 * The same object when there is none.
 */
export function withoutLegacyTask(params: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!params || !('task' in params)) return params;
  const { task: _legacy, ...rest } = params;
  return rest;
}

// ---------------------------------------------------------------------------------------
// Results (basic/index "ResultType", "Per-response protocol fields"; utilities/caching)

export interface FinishOptions {
  /** Put into `_meta["io.modelcontextprotocol/serverInfo"]` when absent (a SHOULD). */
  serverInfo?: unknown;
  /** ttlMs for cacheable results that lack one. Default 0 (immediately stale). */
  ttlMs?: number;
  /** cacheScope for cacheable results that lack one. Default "private". */
  cacheScope?: 'public' | 'private';
  /**
   * Replace the phone's cacheScope with "private": the relay's own tools/list is filtered
   * per credential, which makes it private whatever the phone says.
   */
  forcePrivate?: boolean;
}

/**
 * A phone speaks a session revision, so its results lack what 2026-07-28 requires:
 * `resultType` (MUST; "complete" unless the phone set one, e.g. "input_required"),
 * `ttlMs` + `cacheScope` on complete results of the cacheable methods (MUST), and
 * `_meta["io.modelcontextprotocol/serverInfo"]` (SHOULD). This adds the missing members
 * and never changes one the phone set (except cacheScope under forcePrivate).
 * It is a rewrite: docs/PROTOCOL.md must list it.
 */
export function finishStatelessResult(
  method: string,
  result: unknown,
  opts: FinishOptions = {},
): Record<string, unknown> {
  const r: Record<string, unknown> = isObject(result) ? { ...result } : {};
  for (const [k, v] of missingMembers(method, r, opts)) r[k] = v;
  if (opts.forcePrivate && CACHEABLE_METHODS.has(method) && r.resultType === 'complete') r.cacheScope = 'private';
  if (opts.serverInfo !== undefined) {
    const meta = isObject(r._meta) ? r._meta : undefined;
    if (!meta) r._meta = { [META_SERVER_INFO]: opts.serverInfo };
    else if (!(META_SERVER_INFO in meta)) r._meta = { ...meta, [META_SERVER_INFO]: opts.serverInfo };
  }
  return r;
}

function missingMembers(
  method: string,
  present: { [k: string]: unknown } | Set<string>,
  opts: FinishOptions,
): Array<[string, unknown]> {
  const has = (k: string) => (present instanceof Set ? present.has(k) : k in present);
  const out: Array<[string, unknown]> = [];
  if (!has('resultType')) out.push(['resultType', 'complete']);
  const complete =
    present instanceof Set
      ? !present.has('resultType') || present.has('resultType=complete')
      : present.resultType === undefined || present.resultType === 'complete';
  if (complete && CACHEABLE_METHODS.has(method)) {
    if (!has('ttlMs')) out.push(['ttlMs', opts.ttlMs ?? 0]);
    if (!has('cacheScope')) out.push(['cacheScope', opts.forcePrivate ? 'private' : (opts.cacheScope ?? 'private')]);
  }
  return out;
}

/**
 * finishStatelessResult on the phone's response frame as bytes: the result object's
 * top-level members are scanned (nested values skipped, nothing re-serialised) and the
 * missing members are spliced in right after its `{`; serverInfo goes into an existing
 * `_meta` object the same way. Frames that are not a result (errors, malformed) come back
 * unchanged. forcePrivate with a phone-set cacheScope falls back to a full parse.
 */
export function finishStatelessResultFrame(method: string, frame: Buffer, opts: FinishOptions = {}): Buffer {
  const top = objectMembers(frame, skipWs(frame, 0));
  if (!top) return frame;
  const result = top.members.get('result');
  if (!result || frame[result.start] !== OPEN_OBJ) return frame;
  const members = objectMembers(frame, result.start);
  if (!members) return frame;
  const keys = new Set(members.members.keys());
  const rt = members.members.get('resultType');
  if (rt && frame.toString('utf8', rt.start, rt.end) === '"complete"') keys.add('resultType=complete');
  if (opts.forcePrivate && CACHEABLE_METHODS.has(method) && keys.has('cacheScope')) {
    const cs = members.members.get('cacheScope')!;
    if (frame.toString('utf8', cs.start, cs.end) !== '"private"' && (!rt || keys.has('resultType=complete'))) {
      try {
        const parsed = parseJson(frame.toString('utf8')) as Record<string, unknown>;
        parsed.result = finishStatelessResult(method, parsed.result, opts);
        return Buffer.from(stringifyJson(parsed), 'utf8');
      } catch {
        return frame;
      }
    }
  }
  const add = missingMembers(method, keys, opts);
  const inserts: Array<{ at: number; text: string }> = [];
  const meta = members.members.get('_meta');
  if (opts.serverInfo !== undefined) {
    if (!meta) add.push(['_meta', { [META_SERVER_INFO]: opts.serverInfo }]);
    else if (frame[meta.start] === OPEN_OBJ) {
      const inner = objectMembers(frame, meta.start);
      if (inner && !inner.members.has(META_SERVER_INFO)) {
        inserts.push({
          at: meta.start + 1,
          text: member(META_SERVER_INFO, opts.serverInfo) + (inner.members.size > 0 ? ',' : ''),
        });
      }
    }
  }
  if (add.length > 0) {
    inserts.push({
      at: result.start + 1,
      text: add.map(([k, v]) => member(k, v)).join(',') + (members.members.size > 0 ? ',' : ''),
    });
  }
  if (inserts.length === 0) return frame;
  inserts.sort((a, b) => a.at - b.at);
  const parts: Buffer[] = [];
  let from = 0;
  for (const ins of inserts) {
    parts.push(frame.subarray(from, ins.at), Buffer.from(ins.text, 'utf8'));
    from = ins.at;
  }
  parts.push(frame.subarray(from));
  return Buffer.concat(parts);
}

function member(k: string, v: unknown): string {
  return `${JSON.stringify(k)}:${JSON.stringify(v)}`;
}

/** The members of the object at s[i] === '{' with their value spans, or undefined. */
function objectMembers(s: Buffer, i: number): { members: Map<string, Span>; end: number } | undefined {
  const r = scanObject(s, i);
  return r.ok ? { members: r.members, end: r.end } : undefined;
}

// ---------------------------------------------------------------------------------------
// subscriptions/listen (basic/patterns/subscriptions)

/**
 * subscriptions/listen is answered only as an SSE stream, so a client whose Accept does not list
 * `text/event-stream` (JSON answers only, or no Accept: docs/decisions/0215-post-media-types.md)
 * cannot be served it: 406 with this error, as GET /mcp's stream is refused (docs/PROTOCOL.md).
 * The same test as every other stream answer of the relay: the Accept lists the type.
 */
export function listenNotAcceptable(accept: string | undefined): JsonRpcErrorObject | undefined {
  if (accept?.includes('text/event-stream')) return undefined;
  return {
    code: INVALID_REQUEST,
    message:
      'Not Acceptable: subscriptions/listen is answered only as an SSE stream; Accept must list text/event-stream',
  };
}

export interface SubscriptionFilter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
}

/** params.notifications of a subscriptions/listen request, or -32602. */
export function parseSubscriptionFilter(
  params: Record<string, unknown> | undefined,
): { ok: true; filter: SubscriptionFilter } | { ok: false; error: JsonRpcErrorObject } {
  const n = params?.notifications;
  const bad = (m: string) => ({ ok: false as const, error: { code: INVALID_PARAMS, message: `Invalid params: ${m}` } });
  if (!isObject(n)) return bad('params.notifications must be an object');
  const filter: SubscriptionFilter = {};
  for (const k of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) {
    if (n[k] === undefined) continue;
    if (typeof n[k] !== 'boolean') return bad(`notifications.${k} must be a boolean`);
    if (n[k]) filter[k] = true;
  }
  if (n.resourceSubscriptions !== undefined) {
    if (!Array.isArray(n.resourceSubscriptions) || !n.resourceSubscriptions.every((u) => typeof u === 'string')) {
      return bad('notifications.resourceSubscriptions must be an array of strings');
    }
    if (n.resourceSubscriptions.length > 0) filter.resourceSubscriptions = [...new Set(n.resourceSubscriptions)];
  }
  return { ok: true, filter };
}

export interface AcknowledgeOptions {
  /**
   * Whether the relay honours resourceSubscriptions: it must then have sent
   * `resources/subscribe` to the phone for those URIs. Default false (omitted from the ack).
   */
  resourceSubscriptions?: boolean;
}

/**
 * What the relay agrees to honour: a type is kept only when the phone's capabilities
 * announce it (tools.listChanged, prompts.listChanged, resources.listChanged,
 * resources.subscribe). Unsupported types are omitted, as the spec says.
 */
export function honouredFilter(
  requested: SubscriptionFilter,
  serverCapabilities: unknown,
  opts: AcknowledgeOptions = {},
): SubscriptionFilter {
  const caps = isObject(serverCapabilities) ? serverCapabilities : {};
  const flag = (cap: string, field: string) => isObject(caps[cap]) && caps[cap][field] === true;
  const out: SubscriptionFilter = {};
  if (requested.toolsListChanged && flag('tools', 'listChanged')) out.toolsListChanged = true;
  if (requested.promptsListChanged && flag('prompts', 'listChanged')) out.promptsListChanged = true;
  if (requested.resourcesListChanged && flag('resources', 'listChanged')) out.resourcesListChanged = true;
  if (requested.resourceSubscriptions?.length && opts.resourceSubscriptions && flag('resources', 'subscribe')) {
    out.resourceSubscriptions = [...requested.resourceSubscriptions];
  }
  return out;
}

/** The first message on a listen stream: `notifications/subscriptions/acknowledged`. */
export function acknowledgeSubscription(
  subscriptionId: JsonRpcId,
  honoured: SubscriptionFilter,
): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    method: 'notifications/subscriptions/acknowledged',
    params: { _meta: { [META_SUBSCRIPTION_ID]: subscriptionId }, notifications: honoured },
  };
}

/**
 * A phone notification as it goes out on one listen stream, tagged with the subscription
 * id, or undefined when the stream did not opt in to it. Request-scoped notifications
 * (progress, message, cancelled) never go on a listen stream.
 */
export function subscriptionNotification(
  notification: unknown,
  subscriptionId: JsonRpcId,
  honoured: SubscriptionFilter,
): Record<string, unknown> | undefined {
  if (!isObject(notification) || typeof notification.method !== 'string') return undefined;
  const params = isObject(notification.params) ? notification.params : {};
  let wanted = false;
  switch (notification.method) {
    case 'notifications/tools/list_changed':
      wanted = honoured.toolsListChanged === true;
      break;
    case 'notifications/prompts/list_changed':
      wanted = honoured.promptsListChanged === true;
      break;
    case 'notifications/resources/list_changed':
      wanted = honoured.resourcesListChanged === true;
      break;
    case 'notifications/resources/updated':
      wanted = typeof params.uri === 'string' && (honoured.resourceSubscriptions ?? []).includes(params.uri);
      break;
  }
  if (!wanted) return undefined;
  const meta = isObject(params._meta) ? params._meta : {};
  return {
    jsonrpc: '2.0',
    method: notification.method,
    params: { ...params, _meta: { ...meta, [META_SUBSCRIPTION_ID]: subscriptionId } },
  };
}

/**
 * The graceful end of a listen stream the relay ends itself (a drain, the key over its stream
 * budget, a revocation): the response to the listen request, written last before the stream
 * closes (spec basic/patterns/subscriptions "Graceful Closure"). Never a
 * `notifications/cancelled` on Streamable HTTP (docs/PROTOCOL.md "Revision 2026-07-28").
 */
export function subscriptionClosedResult(subscriptionId: JsonRpcId, serverInfo?: unknown): Record<string, unknown> {
  const meta: Record<string, unknown> = { [META_SUBSCRIPTION_ID]: subscriptionId };
  if (serverInfo !== undefined) meta[META_SERVER_INFO] = serverInfo;
  return { jsonrpc: '2.0', id: subscriptionId, result: { resultType: 'complete', _meta: meta } };
}

// ---------------------------------------------------------------------------------------
// Logging (server/utilities/logging; deprecated but present)

const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

/**
 * "If absent, the server MUST NOT send any notifications/message for this request": a
 * phone log message goes on a request's stream only when that request set
 * `_meta["io.modelcontextprotocol/logLevel"]` and the message is at least that severe.
 */
export function shouldForwardLog(requestMeta: Record<string, unknown> | undefined, notification: unknown): boolean {
  const want = requestMeta?.[META_LOG_LEVEL];
  if (typeof want !== 'string') return false;
  const level = isObject(notification) && isObject(notification.params) ? notification.params.level : undefined;
  const w = LOG_LEVELS.indexOf(want);
  const l = typeof level === 'string' ? LOG_LEVELS.indexOf(level) : -1;
  return w >= 0 && l >= w;
}
