// MCP protocol revisions the relay speaks to clients.
export const SESSION_REVISIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export const STATELESS_REVISIONS = ['2026-07-28'] as const;
export type SessionRevision = (typeof SESSION_REVISIONS)[number];

export const LATEST_SESSION_REVISION: SessionRevision = '2025-11-25';
/** Spec: a request without MCP-Protocol-Version on a session revision is taken as 2025-03-26. */
export const DEFAULT_HEADER_REVISION: SessionRevision = '2025-03-26';

export function isSessionRevision(v: unknown): v is SessionRevision {
  return typeof v === 'string' && (SESSION_REVISIONS as readonly string[]).includes(v);
}

/** initialize: answer the client's version if we speak it, else our latest (the client decides). */
export function negotiateRevision(requested: unknown): SessionRevision {
  return isSessionRevision(requested) ? requested : LATEST_SESSION_REVISION;
}

/** JSON-RPC batches exist only in 2025-03-26. */
export function allowsBatch(rev: SessionRevision): boolean {
  return rev === '2025-03-26';
}

/** A revision served statelessly, without sessions (2026-07-28). */
export function isStatelessRevision(v: unknown): boolean {
  return typeof v === 'string' && (STATELESS_REVISIONS as readonly string[]).includes(v);
}

/**
 * What a GET or DELETE of /mcp is, from its `Mcp-Session-Id` and `MCP-Protocol-Version`
 * (docs/PROTOCOL.md, "Revisions and sessions" and "Revision 2026-07-28 (stateless)"):
 * - `stateless` (answered 405, `Allow: POST`): the version is a stateless revision, which has no
 *   GET stream and no session to delete, with a session id or without; or, without a session
 *   id, any version that is not a session revision (the era rules of classifyEra in
 *   ./stateless.ts: such a request is a stateless client's);
 * - `unsupported-version` (answered 400): a session id with a version that is neither — a
 *   session request's version must name a session revision;
 * - `session`: no version, or a session revision.
 */
export function getOrDeleteEra(
  sessionId: string | undefined,
  version: string | undefined,
): 'session' | 'stateless' | 'unsupported-version' {
  if (!version || isSessionRevision(version)) return 'session';
  if (isStatelessRevision(version) || !sessionId) return 'stateless';
  return 'unsupported-version';
}
