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
