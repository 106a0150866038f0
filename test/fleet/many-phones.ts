// Many paired phones in one account, made through the store (no sockets, no HTTP): the large
// pools the allocation tests need (test/fleet/allocation-walk.test.ts, allocation-large-pool.test.ts).
import { hashPairingCode, newId, newPairingCode } from '../../src/crypto/secrets.ts';
import type { Store } from '../../src/store/index.ts';

/** Phones paired together at a time. */
const CHUNK = 25;

/**
 * Pairs `n` phones into `accountId`, phone `i` with the hand-set labels `labels(i)` and, when
 * `initResult` gives one, that initialize result (the phone's facts). Their ids, by `i`.
 */
export async function pairMany(
  store: Store,
  accountId: string,
  n: number,
  labels: (i: number) => Record<string, string>,
  initResult?: (i: number) => unknown,
): Promise<string[]> {
  const ids: string[] = new Array<string>(n);
  for (let from = 0; from < n; from += CHUNK) {
    const chunk = Array.from({ length: Math.min(CHUNK, n - from) }, (_, k) => from + k);
    await Promise.all(
      chunk.map(async (i) => {
        const code = newPairingCode();
        const made = await store.createPairingCode({
          accountId,
          codeHash: hashPairingCode(code),
          expiresAt: new Date(Date.now() + 600_000),
        });
        if (!made.ok) throw new Error(`pairing code: ${made.error}`);
        const r = await store.redeemPairingCode({
          codeHash: hashPairingCode(code),
          deviceId: newId('dev'),
          publicKey: `pk-${i}`,
          name: `phone-${i}`,
          now: new Date(),
        });
        if (!r.ok) throw new Error(`pairing: ${r.error}`);
        ids[i] = r.device.id;
        const set = labels(i);
        if (Object.keys(set).length > 0) await store.fleet.updateLabels(r.device.id, { set, remove: [] });
      }),
    );
  }
  if (initResult)
    await store.recordDevicesSeen(ids.map((id, i) => ({ id, seenAt: new Date(), initResult: initResult(i) })));
  return ids;
}
