// Allocation from a pool (docs/decisions/0171-allocation-atomicity.md): pick the account's
// phones that match both the key's and the request's selector, skip those allocated (and,
// unless asked, those offline), and take one with the store's conditional upsert. A lost race
// on one phone moves on to the next; the database decides who wins. Every free candidate is
// looked at before the answer is "none" (allocate below says what bounds that).
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

/** The equality requirements on hand-set labels: what the devices list filters in SQL (labels @> …). */
export function containsPart(sel: Selector): Record<string, string> {
  const out: Record<string, string> = {};
  for (const r of sel) if (r.op === 'eq' && !isFactKey(r.key)) out[r.key] = r.value;
  return out;
}

/** A selector's requirements on hand-set labels: what SQL filters on (src/store/fleet-store.ts freeDevices); facts are matched here. */
function labelPart(sel: Selector): Selector {
  return sel.filter((r) => !isFactKey(r.key));
}

export async function allocate(
  ctx: GatewayContext,
  fk: ResolvedFleetKey,
  wanted: Selector,
  ttlMs: number,
  opts: { includeOffline: boolean },
): Promise<Allocation | undefined> {
  const selector = [...fk.selector, ...wanted];
  const inSql = labelPart(selector);
  const take = async (deviceId: string) => {
    const at = new Date();
    return ctx.store.fleet.allocate({
      id: newId('alloc'),
      deviceId,
      accountId: fk.account.id,
      keyId: fk.key.id,
      expiresAt: new Date(at.getTime() + ttlMs),
      now: at,
    });
  };

  // First a random page of free candidates: concurrent callers start on different phones, and a
  // phone lost to another caller (or offline) moves on to the next. With the hand-set label
  // requirements filtered in SQL, this page is usually the only read.
  const first = await ctx.store.fleet.freeDevices(fk.account.id, inSql, new Date(), BATCH);
  for (const d of first) {
    if (!matches(selector, allLabels(d))) continue;
    if (!opts.includeOffline && !(await onlineNode(ctx, d.id))) continue;
    const a = await take(d.id);
    if (a) return a;
  }
  // Fewer than a page: that was every free candidate.
  if (first.length < BATCH) return undefined;

  // More free candidates than a page, none of the page taken (facts that do not match, phones
  // offline, races lost): every other free candidate is looked at, so a free matching phone is
  // found whenever there is one (docs/decisions/0171-allocation-atomicity.md, "Amended"). Keyset
  // pages in id order, from the first page's first phone (a random one, so concurrent walks
  // start apart) to the last id, then from the first id back up to it.
  // Bound: `after` only moves forward and the second leg stops below the pivot, so each free
  // candidate is read at most once here and the loop ends: at most ceil(free candidates / PAGE)
  // + 2 reads after the first page (a phone paired during the walk is read at most once too).
  const pivot = first[0].id;
  const tried = new Set(first.map((d) => d.id));
  let after: string | undefined = pivot;
  let before: string | undefined;
  for (;;) {
    const page = await ctx.store.fleet.freeDevices(fk.account.id, inSql, new Date(), PAGE, { after, before });
    const candidates = page.filter((d) => !tried.has(d.id) && matches(selector, allLabels(d)));
    // Where each candidate is, looked up together for the page (a mostly offline pool would
    // otherwise cost one bus round trip per phone in turn).
    const online = opts.includeOffline ? undefined : await Promise.all(candidates.map((d) => onlineNode(ctx, d.id)));
    for (let i = 0; i < candidates.length; i++) {
      if (online && !online[i]) continue;
      const a = await take(candidates[i].id);
      if (a) return a;
    }
    if (page.length === PAGE) after = page[page.length - 1].id;
    else if (before === undefined) {
      // The end of the ids: wrap around to the first, up to the pivot.
      after = undefined;
      before = pivot;
    } else return undefined;
  }
}

/** Candidates in the random first page; candidates per page of the walk after it. */
const BATCH = 32;
const PAGE = 128;
