// Fleet keys (docs/decisions/0170-fleet-model.md): account-scoped, reaching every phone of the
// account that matches their selector. Shown once as "pbf_…"; only the SHA-256 is stored.
import { randomBytes } from 'node:crypto';
import { newId, sha256Hex } from '../crypto/secrets.ts';
import type { Account, FleetKey, Scope, Store } from '../store/index.ts';
import { formatSelector, parseSelector, type Selector } from './labels.ts';

export const FLEET_KEY_PREFIX = 'pbf_';

export function newFleetToken(): string {
  return `${FLEET_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
}

export function isFleetToken(token: string | undefined): token is string {
  return token !== undefined && token.startsWith(FLEET_KEY_PREFIX) && token.length <= 512;
}

export class FleetKeyError extends Error {
  constructor(
    readonly code: 'limit_reached' | 'no_account',
    message: string,
  ) {
    super(message);
  }
}

/** Mints a fleet key. The token is returned once; throws LabelError on a bad selector, FleetKeyError at the plan cap. */
export async function createFleetKey(
  store: Store,
  opts: { accountId: string; selector?: string; scopes: Scope[] },
): Promise<{ id: string; token: string; fleet: true; selector: string; scopes: Scope[]; account_id: string }> {
  const selector = formatSelector(parseSelector(opts.selector));
  const token = newFleetToken();
  const r = await store.fleet.createKey({
    id: newId('fkey'),
    accountId: opts.accountId,
    hash: sha256Hex(token),
    scopes: opts.scopes,
    selector,
  });
  if (!r.ok)
    throw new FleetKeyError(
      r.error,
      r.error === 'limit_reached' ? 'the account is at its plan limit for keys' : `no account "${opts.accountId}"`,
    );
  return { id: r.key.id, token, fleet: true, selector, scopes: opts.scopes, account_id: opts.accountId };
}

export interface ResolvedFleetKey {
  key: FleetKey;
  selector: Selector;
  account: Account;
}

const CACHE_TTL_MS = 30_000;
const CACHE_MAX = 10_000;

/**
 * Presented fleet keys → their row, parsed selector and account, cached per node like device
 * keys (src/gateway/auth.ts): positive answers of unlocked accounts only, dropped at once by
 * revocations and locks (hub.onRevoke).
 */
export class FleetKeyLookup {
  private readonly cache = new Map<string, { v: ResolvedFleetKey; until: number }>();

  constructor(private readonly store: Store) {}

  async resolve(token: string): Promise<ResolvedFleetKey | undefined> {
    if (!isFleetToken(token)) return undefined;
    const now = Date.now();
    const hit = this.cache.get(token);
    if (hit && hit.until > now) return hit.v;
    const key = await this.store.fleet.findKeyByHash(sha256Hex(token));
    const account = key && (await this.store.getAccount(key.accountId));
    if (!key || !account) {
      this.cache.delete(token);
      return undefined;
    }
    const v = { key, selector: parseSelector(key.selector), account };
    // A locked account is read again each time: an unlock reaches no handler here (only
    // revocations and locks do, hub.onRevoke), and it must work at once, not in 30 s.
    if (account.locked) return v;
    if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(token, { v, until: now + CACHE_TTL_MS });
    return v;
  }

  invalidate(match: { tokenId?: string; accountId?: string }): void {
    for (const [t, { v }] of this.cache)
      if ((match.tokenId && v.key.id === match.tokenId) || (match.accountId && v.account.id === match.accountId))
        this.cache.delete(t);
  }
}
