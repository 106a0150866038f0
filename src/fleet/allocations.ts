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
  const now = new Date();
  const [devices, taken] = await Promise.all([
    ctx.store.fleet.listDevices({ accountId: fk.account.id, contains: containsPart(selector) }),
    ctx.store.fleet.allocatedDevices(fk.account.id, now),
  ]);
  const candidates = devices.filter((d) => !taken.has(d.id) && matches(selector, allLabels(d)));
  shuffle(candidates); // concurrent callers start on different phones instead of all on the first
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
  return undefined;
}

function shuffle<T>(a: T[]): void {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
}
