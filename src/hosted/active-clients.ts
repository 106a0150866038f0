// Which MCP clients a phone has now, for the dashboard: sessions used within a window, grouped
// into clients (one credential, one client name and version: mcp-remote opens two sessions per
// run, which are one client; an OAuth client's credential is its grant, so its sessions before
// and after a refresh are one client too, docs/decisions/0162-a-caller-is-its-grant.md). Pure; the dashboard reads the sessions from the bus
// (docs/decisions/0169-active-clients.md).
import type { SessionRecord } from '../bus/types.ts';

export interface ActiveClient {
  name: string;
  version?: string;
  /** Its sessions used within the window. */
  sessions: number;
  /** Its latest request (ms). */
  lastSeenAt: number;
}

export function activeClients(sessions: readonly SessionRecord[], now: number, windowMs: number): ActiveClient[] {
  const groups = new Map<string, ActiveClient>();
  for (const s of sessions) {
    if (s.lastSeenAt < now - windowMs) continue;
    const name = s.client?.name ?? 'unnamed client';
    const version = s.client?.version;
    // The credential is the grant for an OAuth client, which a refresh does not change; a record
    // from a node that did not write it yet (a rolling upgrade) falls back to its token.
    const key = JSON.stringify([s.credential ?? s.tokenId, name, version ?? null]);
    const g = groups.get(key);
    if (g) {
      g.sessions++;
      g.lastSeenAt = Math.max(g.lastSeenAt, s.lastSeenAt);
    } else groups.set(key, { name, ...(version ? { version } : {}), sessions: 1, lastSeenAt: s.lastSeenAt });
  }
  return [...groups.values()].sort((a, b) => b.lastSeenAt - a.lastSeenAt);
}

/** "10 min", "45 s": the window as the dashboard states it. */
export function windowText(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;
}
