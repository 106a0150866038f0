// Client credentials on /mcp: X-Api-Key or Authorization: Bearer (X-Api-Key wins,
// docs/decisions/0001-x-api-key-wins-over-bearer.md), looked up by SHA-256 with a short cache that invalidation
// events clear at once.
import { sha256Hex } from '../crypto/secrets.ts';
import type { Account, Store, Token } from '../store/types.ts';

export interface Credential {
  token: Token;
  account: Account;
}

// Invalidations (revoke, removal, plan lock) clear entries at once through the bus and the
// store's journal; the TTL only bounds how long a missed one could linger.
const CACHE_TTL_MS = 30_000;
const CACHE_MAX = 10_000;
/**
 * While the store cannot be read, a key checked within this long keeps working past its TTL
 * (docs/decisions/0207-known-keys-through-a-store-outage.md): a revocation cannot reach the node
 * through the journal meanwhile either, and it applies as soon as the node reads it again.
 */
export const STALE_IF_STORE_DOWN_MS = 10 * 60_000;

export function presentedToken(headers: Record<string, string>): string | undefined {
  const key = headers['x-api-key']?.trim();
  if (key) return key;
  const auth = headers['authorization'];
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m) return m[1];
  }
  return undefined;
}

export class Authenticator {
  // Positive answers only: a key created by the CLI a moment after a failed try must work at once.
  // Keyed by the presented key itself (held in memory only, like the request that carried it), so
  // a known key is not hashed again on every call; the store only ever sees the hash.
  private readonly cache = new Map<string, { cred: Credential; until: number }>();
  private readonly ttlMs: number;
  private readonly storeUp: () => boolean;

  /**
   * `storeUp`: whether the node can read the store now (its journal tail); while it cannot, a
   * known key is answered from the cache at once instead of waiting for the store to fail.
   */
  constructor(
    private readonly store: Store,
    opts: { storeUp?: () => boolean; ttlMs?: number } = {},
  ) {
    this.ttlMs = opts.ttlMs ?? CACHE_TTL_MS;
    this.storeUp = opts.storeUp ?? (() => true);
  }

  /** A cached credential past its TTL but within STALE_IF_STORE_DOWN_MS of it, not expired itself. */
  private stale(token: string, now: number): Credential | undefined {
    const hit = this.cache.get(token);
    if (!hit || hit.until + STALE_IF_STORE_DOWN_MS <= now) return undefined;
    if (hit.cred.token.expiresAt && hit.cred.token.expiresAt.getTime() <= now) return undefined;
    return hit.cred;
  }

  /** The credential from the cache alone (no store, no wait); undefined when the store must be asked. */
  cached(token: string | undefined, now = Date.now()): Credential | undefined {
    if (!token || token.length > 512) return undefined;
    const hit = this.cache.get(token);
    if (hit && hit.until > now && (!hit.cred.token.expiresAt || hit.cred.token.expiresAt.getTime() > now))
      return hit.cred;
    return undefined;
  }

  async authenticate(token: string | undefined): Promise<Credential | undefined> {
    if (!token || token.length > 512) return undefined;
    const now = Date.now();
    const hit = this.cached(token, now);
    if (hit) return hit;
    const stale = this.stale(token, now);
    if (stale && !this.storeUp()) return stale;
    // One lookup per key at a time: when a busy key's entry lapses, the calls in flight for it
    // wait for the same answer instead of each asking the store. A caller joins only a lookup
    // that started since the last invalidation, so it never gets an answer older than one it
    // could have heard of.
    const pending = this.lookups.get(token);
    if (pending && pending.generation === this.generation) return pending.answer;
    const answer = this.lookup(token, now);
    const entry = { generation: this.generation, answer };
    this.lookups.set(token, entry);
    try {
      return await answer;
    } finally {
      if (this.lookups.get(token) === entry) this.lookups.delete(token);
    }
  }

  /** Lookups in flight, by presented key, with the invalidation generation they started in. */
  private readonly lookups = new Map<string, { generation: number; answer: Promise<Credential | undefined> }>();

  private async lookup(token: string, now: number): Promise<Credential | undefined> {
    // An invalidation that lands while the store is asked may describe a change the answer
    // predates (a lock committed after the read): ask again, and never cache an answer that an
    // invalidation overtook.
    for (let attempt = 0; ; attempt++) {
      const generation = this.generation;
      let t: Token | undefined;
      let account: Account | undefined;
      try {
        t = await this.store.findTokenByHash(sha256Hex(token), new Date(now));
        account = t ? await this.store.getAccount(t.accountId) : undefined;
      } catch (err) {
        // Unreachable store: a key this node knew stays known (an invalidation since would
        // have removed it from the cache); an unknown one fails as before (store_unavailable).
        const still = generation === this.generation ? this.stale(token, Date.now()) : undefined;
        if (still) return still;
        throw err;
      }
      if (!t || !account) {
        this.cache.delete(token);
        return undefined;
      }
      const cred = { token: t, account };
      if (generation !== this.generation) {
        if (attempt === 0) continue;
        return cred;
      }
      if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(token, { cred, until: now + this.ttlMs });
      return cred;
    }
  }

  /** Bumped by every invalidation: a lookup that saw it change does not cache its answer. */
  private generation = 0;

  /** Drops cached entries matching an invalidation event. */
  invalidate(match: { tokenId?: string; deviceId?: string; accountId?: string }): void {
    this.generation++;
    for (const [key, { cred }] of this.cache) {
      if (
        (match.tokenId && cred.token.id === match.tokenId) ||
        (match.deviceId && cred.token.deviceId === match.deviceId) ||
        (match.accountId && cred.account.id === match.accountId)
      ) {
        this.cache.delete(key);
      }
    }
  }
}
