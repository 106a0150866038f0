import { describe, expect, it } from 'vitest';
import type { SessionRecord } from '../bus/types.ts';
import { activeClients, windowText } from './active-clients.ts';

const s = (id: string, tokenId: string, lastSeenAt: number, client?: SessionRecord['client']): SessionRecord => ({
  id,
  tokenId,
  deviceId: 'd',
  accountId: 'a',
  revision: '2025-11-25',
  scopes: ['devices:read'],
  createdAt: 0,
  lastSeenAt,
  ...(client ? { client } : {}),
});

describe('active clients', () => {
  it('counts sessions used within the window, one client per credential, name and version', () => {
    const now = 1_000_000;
    const w = 600_000;
    const got = activeClients(
      [
        s('1', 'k1', now - 10, { name: 'mcp-remote', version: '0.1.15' }),
        s('2', 'k1', now - 5_000, { name: 'mcp-remote', version: '0.1.15' }), // the same run's second session
        s('3', 'k2', now - w - 1, { name: 'idle-agent' }), // outside the window
        s('4', 'k2', now - w, { name: 'inspector', version: '2.12' }), // exactly at its edge: active
        s('5', 'k3', now - 1), // written before sessions carried a client
      ],
      now,
      w,
    );
    expect(got).toEqual([
      { name: 'unnamed client', sessions: 1, lastSeenAt: now - 1 },
      { name: 'mcp-remote', version: '0.1.15', sessions: 2, lastSeenAt: now - 10 },
      { name: 'inspector', version: '2.12', sessions: 1, lastSeenAt: now - w },
    ]);
  });
  it('groups by credential: an OAuth client that refreshed its token (same grant) is one client', () => {
    const now = 1_000_000;
    const w = 600_000;
    const oauth = (id: string, tokenId: string, credential: string | undefined, at: number) => ({
      ...s(id, tokenId, at, { name: 'claude-code', version: '2.0.1' }),
      ...(credential ? { credential } : {}),
    });
    const got = activeClients(
      [
        oauth('1', 'access-1', 'grant-a', now - 60_000), // before the refresh
        oauth('2', 'access-2', 'grant-a', now - 10), // after it: a new token, the same grant
        oauth('3', 'access-3', 'grant-b', now - 20), // another connection of the same app
        oauth('4', 'access-4', undefined, now - 30), // written by a node without `credential`: its token
      ],
      now,
      w,
    );
    expect(got.map((c) => [c.sessions, c.lastSeenAt])).toEqual([
      [2, now - 10],
      [1, now - 20],
      [1, now - 30],
    ]);
  });
  it('states the window in words', () => {
    expect(windowText(600_000)).toBe('10 min');
    expect(windowText(4_000)).toBe('4 s');
  });
});
