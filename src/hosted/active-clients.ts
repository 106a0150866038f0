// Which MCP clients a phone has now, for the dashboard: sessions used within a window, grouped
// into clients (one credential, one client name and version: mcp-remote opens two sessions per
// run, which are one client). Pure; the dashboard reads the sessions from the bus
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
    const key = JSON.stringify([s.tokenId, name, version ?? null]);
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
