// Which session a session-revision request belongs to: the caller's own (else 404), renewed
// on the bus, and — while the bus is down — a session this node served lately, so phones on
// this node stay reachable through an outage of Redis.
import type { Exchange } from './http.ts';
import type { GatewayContext } from './context.ts';
import type { Credential } from './auth.ts';
import type { SessionRecord } from '../bus/types.ts';
import type { McpHeaders } from './mcp-headers.ts';
import { BusUnavailableError } from '../bus/index.ts';
import { ExpiringMap } from '../bus/expiring-map.ts';
import { errorResponse } from '../protocol/jsonrpc.ts';
import { INVALID_REQUEST } from '../protocol/errors.ts';
import { JSON_HEADERS } from './mcp-stateless.ts';
import { matchesCredential } from './hub.ts';

const RECENT_SESSIONS_MAX = 10_000;
/** How stale the outage fallback's copy of a session served without a bus touch may get. */
const RECENT_REFRESH_MS = 1_000;

export class SessionLookup {
  /** Sessions this node served lately, to keep local phones reachable while the bus is down. */
  private readonly recent = new ExpiringMap<SessionRecord>();

  constructor(private readonly ctx: GatewayContext) {
    // A revoked credential's sessions must not live on in the outage fallback either.
    ctx.hub.onRevoke((match) => {
      for (const [id, { value: s }] of this.recent.values())
        if (matchesCredential(match, { ...s, sessionId: s.id })) this.recent.delete(id);
    });
  }

  /** The caller's live session, or a 400/404 already sent. */
  async find(ex: Exchange, h: McpHeaders, cred: Credential): Promise<SessionRecord | undefined> {
    const id = h['mcp-session-id'];
    if (!id) {
      ex.send(
        400,
        JSON_HEADERS,
        errorResponse(null, { code: INVALID_REQUEST, message: 'Bad Request: Mcp-Session-Id header is required' }),
      );
      return undefined;
    }
    const s = await this.touch(id);
    // A session belongs to the credential that created it, for the phone it was made for (one
    // fleet key holds sessions with many phones: src/gateway/features.ts); anyone else sees "not found".
    if (!s || s.tokenId !== cred.token.id || s.deviceId !== cred.token.deviceId) {
      ex.send(404, JSON_HEADERS, errorResponse(null, { code: -32001, message: 'Session not found' }));
      return undefined;
    }
    return s;
  }

  /**
   * The shared session, renewed. While the bus is down, a session this node saw recently
   * keeps working for a phone this node holds (nothing else would need the bus); anything
   * else is relay_unavailable.
   */
  private async touch(id: string): Promise<SessionRecord | undefined> {
    const leased = this.ctx.bus.sessions.touchNow?.(id, this.ctx.config.sessionIdleMs);
    if (leased) {
      this.note(leased);
      return leased;
    }
    try {
      const s = await this.ctx.bus.sessions.touch(id, this.ctx.config.sessionIdleMs);
      if (s) this.remember(s);
      else this.recent.delete(id);
      return s;
    } catch (err) {
      const recent = this.recent.get(id);
      if (err instanceof BusUnavailableError && recent && this.ctx.hub.device(recent.deviceId)) {
        recent.lastSeenAt = Date.now();
        return recent;
      }
      throw err;
    }
  }

  /** Kept for the session's idle time, and at most RECENT_SESSIONS_MAX (the oldest go first). */
  remember(s: SessionRecord): void {
    this.recent.delete(s.id);
    this.recent.set(s.id, { ...s }, this.ctx.config.sessionIdleMs);
    if (this.recent.size > RECENT_SESSIONS_MAX) this.recent.delete(this.recent.oldestKey()!);
  }

  /**
   * remember() for a session served without a touch of the bus (in-process store, or a
   * lease): the outage fallback is refreshed only once it is RECENT_REFRESH_MS old, not per call.
   */
  note(s: SessionRecord, now = Date.now()): void {
    const left = this.recent.remainingMs(s.id, now);
    if (left === undefined || left < this.ctx.config.sessionIdleMs - RECENT_REFRESH_MS) this.remember(s);
  }

  /** The session was deleted: no fallback for it either. */
  forget(id: string): void {
    this.recent.delete(id);
  }

  /** Stops the fallback's timers (node shutdown). */
  close(): void {
    this.recent.close();
  }
}
