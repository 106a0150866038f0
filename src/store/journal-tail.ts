// The journal tail's bookkeeping as pure functions (docs/decisions/0163-a-journal-tail-without-gaps.md).
// Journal ids come from a sequence, so they are drawn in one order and committed in another: a
// transaction that drew a lower id may commit after a higher one was read. An id at or below a
// visible row can still appear only while a transaction that was running when that row was read
// is running; once the oldest running transaction (the snapshot's xmin) is past the xmax of the
// snapshot that saw the row, every id up to it is settled. Every journal write follows the change's
// own write in its transaction, so the transaction has its xid before it draws an id.

/** At start, ids this far below the top are read again (transactions in flight at start). */
export const TAIL_START_WINDOW = 1000n;
/** Pending marks kept; beyond, the oldest two merge (later settling, never a gap). */
const MAX_PENDING = 64;

export interface TailCursor {
  /** Every id at or below this is settled: read or never to appear. */
  safe: bigint;
  /** A visible top id and the xmax of the snapshot that saw it, oldest first. */
  pending: { hw: bigint; xmax: bigint }[];
  /** Ids above `safe` already returned. */
  delivered: bigint[];
}

export function formatTailCursor(c: TailCursor): string {
  return JSON.stringify({
    s: String(c.safe),
    p: c.pending.map((p) => [String(p.hw), String(p.xmax)]),
    d: c.delivered.map(String),
  });
}

/** undefined for anything that is not a cursor this module wrote (then the tail starts at now). */
export function parseTailCursor(raw: string): TailCursor | undefined {
  try {
    const v = JSON.parse(raw) as { s: string; p: [string, string][]; d: string[] };
    return {
      safe: BigInt(v.s),
      pending: v.p.map(([hw, xmax]) => ({ hw: BigInt(hw), xmax: BigInt(xmax) })),
      delivered: v.d.map((d) => BigInt(d)),
    };
  } catch {
    return undefined;
  }
}

/**
 * The cursor after a read: `read` are the ids just returned (ascending), `truncated` whether the
 * read stopped at its limit, `xmin`/`xmax` the bounds of the read's snapshot.
 */
export function advanceTail(
  c: TailCursor,
  read: readonly bigint[],
  truncated: boolean,
  xmin: bigint,
  xmax: bigint,
): TailCursor {
  const delivered = [...c.delivered, ...read];
  const top = delivered.reduce((m, id) => (id > m ? id : m), c.safe);
  // A truncated read has not looked beyond its last id: nothing above it may settle yet.
  const readUpTo = truncated && read.length ? read[read.length - 1] : undefined;
  let safe = c.safe;
  const pending: TailCursor['pending'] = [];
  for (const p of c.pending) {
    if (p.xmax <= xmin && (readUpTo === undefined || p.hw <= readUpTo)) {
      if (p.hw > safe) safe = p.hw;
    } else pending.push(p);
  }
  const last = pending.at(-1);
  if (top > safe && (!last || top > last.hw)) pending.push({ hw: top, xmax });
  while (pending.length > MAX_PENDING) {
    const [a, b] = pending.splice(0, 2);
    pending.unshift({ hw: b.hw, xmax: a.xmax > b.xmax ? a.xmax : b.xmax });
  }
  return { safe, pending, delivered: delivered.filter((id) => id > safe) };
}
