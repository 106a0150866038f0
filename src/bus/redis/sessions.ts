// Client sessions (revisions before 2026-07-28) kept in Redis for every node, and the leases
// that let a node serve a session it touched lately from memory: a call on a leased session
// costs no Redis round trip (docs/decisions/0133-session-leases.md). Scripts in scripts.ts.
import type { SessionRecord, SessionStore } from '../types.ts';
import { decodeSession, encodeSession } from '../formats.ts';
import type { RedisBus } from './index.ts';

/**
 * How often a leased session is renewed in Redis while calls use it, and how long a lease
 * serves without a renewal that succeeded (docs/decisions/0133-session-leases.md). Both
 * stay well inside the idle timeout: a lease never outlives the session's Redis expiry.
 */
export const LEASE_RENEW_MS = 2_000;
export const LEASE_MAX_MS = 10_000;

/** A session this node touched in Redis lately, served from memory until it must renew. */
interface Lease {
  rec: SessionRecord;
  /** Date.now() of the last touch Redis answered with the session. */
  confirmedAt: number;
  renewing: boolean;
}

export class RedisSessions implements SessionStore {
  private readonly leases = new Map<string, Lease>();
  /**
   * Counts lease drops: a touch whose reply crosses a drop (the session ended meanwhile, its
   * broadcast came first on the subscriber connection) must not lease it again.
   */
  private drops = 0;

  constructor(private readonly bus: RedisBus) {}

  async create(s: SessionRecord, idleMs: number, maxPerToken = 0): Promise<string[]> {
    // The cap evicts the key's least recently used sessions by their Redis recency: calls this
    // node served from its leases since their last renewal are told first, on the same
    // connection, so Redis orders them before this create (docs/decisions/0133-session-leases.md).
    if (maxPerToken > 0)
      for (const [id, l] of this.leases)
        if (l.rec.tokenId === s.tokenId && l.rec.lastSeenAt > l.confirmedAt)
          this.renew(id, idleMs, l.rec.lastSeenAt).catch(() => {});
    const evicted = await this.bus.run('sessionCreate', [
      s.id,
      encodeSession(s),
      s.deviceId,
      s.tokenId,
      idleMs,
      maxPerToken,
    ]);
    const ids = Array.isArray(evicted) ? evicted.map(String) : [];
    this.drop(ids);
    return ids;
  }

  touch(id: string, idleMs: number): Promise<SessionRecord | undefined> {
    return this.renew(id, idleMs, Date.now());
  }

  /**
   * Renews the session in Redis and leases it; `usedAt` is the use this reports: now for a
   * request, or a use a lease served earlier (what listForDevice then shows as its last use).
   */
  private async renew(id: string, idleMs: number, usedAt: number): Promise<SessionRecord | undefined> {
    const drops = this.drops;
    const rec = await this.bus.run('sessionTouch', [id, idleMs, usedAt]);
    if (rec == null) {
      this.drop([id]);
      return undefined;
    }
    // The script returns the stored JSON string; one this release cannot read is no session.
    const s = this.bus.read(() => decodeSession<SessionRecord>(rec as string));
    if (!s) {
      this.drop([id]);
      return undefined;
    }
    const now = Date.now();
    s.lastSeenAt = usedAt;
    if (drops === this.drops) {
      this.leases.delete(id); // re-inserted: the map's order is least recently confirmed first
      this.leases.set(id, { rec: s, confirmedAt: now, renewing: false });
      if (this.leases.size > MAX_LEASES) this.leases.delete(this.leases.keys().next().value!);
    }
    return s;
  }

  /**
   * The leased session, without a round trip: undefined when this node holds no lease on it
   * (the caller then touches it in Redis, which takes the lease). A lease older than the renew
   * interval is renewed in the background; one that could not be renewed for LEASE_MAX_MS
   * (or half the idle time) no longer serves.
   */
  touchNow(id: string, idleMs: number, now = Date.now()): SessionRecord | undefined {
    const lease = this.leases.get(id);
    if (!lease) return undefined;
    const age = now - lease.confirmedAt;
    if (age >= Math.min(LEASE_MAX_MS, idleMs / 2)) {
      this.leases.delete(id);
      return undefined;
    }
    if (age >= Math.min(LEASE_RENEW_MS, idleMs / 4) && !lease.renewing) {
      lease.renewing = true;
      // `touch` replaces the lease, or drops it when the session is gone; a failed renewal is
      // tried again by a later call.
      const done = () => (lease.renewing = false);
      this.touch(id, idleMs).then(done, done);
    }
    lease.rec.lastSeenAt = now;
    return lease.rec;
  }

  /** Ends this node's leases on these sessions (deleted, evicted: here or, by broadcast, on another node). */
  drop(ids: readonly string[]): void {
    if (ids.length === 0) return;
    this.drops++;
    for (const id of ids) this.leases.delete(id);
  }

  /** The bus was away: a broadcast may have been missed, so nothing leased before is trusted. */
  dropAll(): void {
    this.drops++;
    this.leases.clear();
  }

  async delete(id: string): Promise<boolean> {
    this.drop([id]);
    return Number(await this.bus.run('sessionDelete', [id])) === 1;
  }
  async countForDevice(deviceId: string): Promise<number> {
    return Number(await this.bus.run('sessionCount', [deviceId]));
  }
  async listForDevice(deviceId: string, limit: number): Promise<SessionRecord[]> {
    const flat = (await this.bus.run('sessionList', [deviceId, Math.max(1, Math.floor(limit))])) as unknown[];
    const out: SessionRecord[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      // A record this release cannot read is left out, as `touch` treats it as no session.
      const s = this.bus.read(() => decodeSession<SessionRecord>(String(flat[i])));
      if (!s) continue;
      const seen = Number(flat[i + 1]);
      // This node's lease may know a later use than its last renewal in Redis.
      const leased = this.leases.get(s.id)?.rec.lastSeenAt ?? 0;
      s.lastSeenAt = Math.max(seen || s.lastSeenAt, leased);
      out.push(s);
    }
    return out;
  }
  async deleteWhere(match: { deviceId?: string; tokenId?: string }): Promise<number> {
    if (!match.deviceId && !match.tokenId) return 0;
    // Every node applies the invalidation that calls this (src/gateway/node.ts, applyControl),
    // so each drops its own leases here: no broadcast of the ids is needed.
    const ids: string[] = [];
    for (const [id, l] of this.leases)
      if (l.rec.deviceId === match.deviceId || l.rec.tokenId === match.tokenId) ids.push(id);
    this.drop(ids);
    this.drops++; // a touch in flight may be of a session this deletes
    return Number(await this.bus.run('sessionDeleteWhere', [match.deviceId ?? '', match.tokenId ?? '']));
  }
}

/** Leases one node keeps at most (the least recently confirmed go first): memory, not correctness. */
const MAX_LEASES = 100_000;
