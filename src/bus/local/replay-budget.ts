// The in-process replay buffers' ceilings beyond each session's own (util.ts ReplayLimits):
// bytes for the whole node and bytes for one credential's sessions together. Over either, the
// oldest events go first — the node's oldest for the node budget, the credential's oldest for
// its share — so one key filling buffers pushes out its own events before anyone else's, and
// the node as a whole never holds more than its budget. See docs/decisions/0041-replay-budget.md.

export interface ReplayEntry {
  seq: number;
  streamId: string;
  data: string;
  size: number;
  sessionId: string;
  /** The session's credential, when the session was live at append time. */
  tokenId?: string;
}

export const DEFAULT_REPLAY_NODE_BYTES = 64 * 1024 * 1024;
export const DEFAULT_REPLAY_CREDENTIAL_BYTES = 8 * 1024 * 1024;

interface Share {
  entries: Set<ReplayEntry>;
  bytes: number;
}

export class ReplayBudget {
  readonly nodeBytes: number;
  readonly credentialBytes: number;
  // Sets keep insertion order: the first member is the oldest, deletion is O(1).
  private readonly all = new Set<ReplayEntry>();
  private readonly shares = new Map<string, Share>();
  private total = 0;

  constructor(
    limits: { nodeBytes?: number; credentialBytes?: number },
    /** Removes an event from its session's buffer (the budget has already let go of it). */
    private readonly evict: (e: ReplayEntry) => void,
  ) {
    this.nodeBytes = limits.nodeBytes ?? DEFAULT_REPLAY_NODE_BYTES;
    this.credentialBytes = Math.min(limits.credentialBytes ?? DEFAULT_REPLAY_CREDENTIAL_BYTES, this.nodeBytes);
  }

  /** Bytes held for every session on this node. */
  get bytes(): number {
    return this.total;
  }

  /** Bytes held for one credential's sessions. */
  bytesOf(tokenId: string): number {
    return this.shares.get(tokenId)?.bytes ?? 0;
  }

  /** Counts a new event, then evicts older ones (never `e` itself) until both ceilings hold. */
  add(e: ReplayEntry): void {
    this.all.add(e);
    this.total += e.size;
    let share: Share | undefined;
    if (e.tokenId !== undefined) {
      share = this.shares.get(e.tokenId);
      if (!share) this.shares.set(e.tokenId, (share = { entries: new Set(), bytes: 0 }));
      share.entries.add(e);
      share.bytes += e.size;
    }
    while (share && share.bytes > this.credentialBytes) {
      const oldest = share.entries.values().next().value!;
      if (oldest === e) break;
      this.drop(oldest);
    }
    while (this.total > this.nodeBytes) {
      const oldest = this.all.values().next().value!;
      if (oldest === e) break;
      this.drop(oldest);
    }
  }

  /** Events that left their buffer some other way (session cap, session gone, buffer expired). */
  forget(entries: Iterable<ReplayEntry>): void {
    for (const e of entries) this.release(e);
  }

  private drop(e: ReplayEntry): void {
    this.release(e);
    this.evict(e);
  }

  private release(e: ReplayEntry): void {
    if (!this.all.delete(e)) return;
    this.total -= e.size;
    if (e.tokenId === undefined) return;
    const share = this.shares.get(e.tokenId);
    if (!share || !share.entries.delete(e)) return;
    share.bytes -= e.size;
    if (share.entries.size === 0) this.shares.delete(e.tokenId);
  }
}
