// Allocation from a pool (docs/decisions/0171-allocation-atomicity.md): pick the account's
// phones that match both the key's and the request's selector, skip those allocated (and,
// unless asked, those offline), and take one with the store's conditional upsert. A lost race
// on one phone moves on to the next; the database decides who wins.
import { newId } from '../crypto/secrets.ts';
import type { GatewayContext } from '../gateway/context.ts';
import type { Allocation } from '../store/index.ts';
import { isFactKey, matches, type Selector } from './labels.ts';
import { allLabels } from './access.ts';
import type { ResolvedFleetKey } from './keys.ts';

/** Where a phone's socket is, cluster-wide (the bus's ownership records; this node's hub first). */
export async function onlineNode(ctx: GatewayContext, deviceId: string): Promise<string | undefined> {
  if (ctx.hub.device(deviceId)) return ctx.config.nodeId;
  const owner = await ctx.bus.ownerOf(deviceId).catch(() => undefined);
  return owner?.nodeId;
}

/** The equality requirements on hand-set labels: what SQL can filter on (labels @> …). */
export function containsPart(sel: Selector): Record<string, string> {
  const out: Record<string, string> = {};
  for (const r of sel) if (r.op === 'eq' && !isFactKey(r.key)) out[r.key] = r.value;
  return out;
}

export async function allocate(
  ctx: GatewayContext,
  fk: ResolvedFleetKey,
  wanted: Selector,
  ttlMs: number,
  opts: { includeOffline: boolean },
): Promise<Allocation | undefined> {
  const selector = [...fk.selector, ...wanted];
  // Rounds of random free candidates: concurrent callers start on different phones, and a
  // phone lost to another caller (or offline) moves on to the next.
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const batch = await ctx.store.fleet.freeDevices(fk.account.id, containsPart(selector), new Date(), BATCH);
    const candidates = batch.filter((d) => matches(selector, allLabels(d)));
    for (const d of candidates) {
      if (!opts.includeOffline && !(await onlineNode(ctx, d.id))) continue;
      const at = new Date();
      const a = await ctx.store.fleet.allocate({
        id: newId('alloc'),
        deviceId: d.id,
        accountId: fk.account.id,
        keyId: fk.key.id,
        expiresAt: new Date(at.getTime() + ttlMs),
        now: at,
      });
      if (a) return a;
    }
    // Fewer than a batch: that was every free phone.
    if (batch.length < BATCH) return undefined;
  }
  return undefined;
}

/** Candidates read per round, and rounds before giving up (a pool of mostly offline phones). */
const BATCH = 32;
const MAX_ROUNDS = 8;
