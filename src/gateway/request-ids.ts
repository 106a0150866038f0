// The ids this process gives its requests to other nodes (`rid`). The owner keys the requests it
// serves by origin node id and rid and sends their answers to that node id, so two processes
// under one node id (a restart: a StatefulSet pod, a kill -9) must never use the same rid while
// the first one's calls may still answer. Ids come in blocks that the bus numbers per node id
// (a counter in Redis), so each process's blocks differ from its predecessors'; and every id is
// below 2^30, a small integer in V8 on every build (a heap number costs the cross-node path
// 3–5 µs per call: docs/decisions/0243-requests-on-the-bus-belong-to-one-process.md).

/** Ids per block: a block lasts about 100 s at 10,000 cross-node calls a second. */
export const RID_BLOCK_SIZE = 1 << 20;
/** Blocks before the ids wrap around, staying below 2^30. */
const BLOCKS = 1 << 10;
/** A new block is fetched once this many ids of the current one are left. */
const REFILL_AT = RID_BLOCK_SIZE >> 1;

export class RequestIds {
  private next = 0;
  /** One past the current block's last id. */
  private end = 0;
  /** A block fetched ahead of need, or -1. */
  private spare = -1;
  private fetching: Promise<void> | undefined;

  /**
   * @param fetchBlock The next block number of this node id (1, 2, …; any integer will do); a
   *   failure takes a random block, which a predecessor's may share only by chance.
   */
  constructor(private readonly fetchBlock: () => Promise<number>) {
    this.fetchAhead();
  }

  /** The next id, or 0 when none is at hand: then await `more()` and take again. */
  take(): number {
    if (this.next >= this.end) {
      if (this.spare < 0) {
        this.fetchAhead();
        return 0;
      }
      this.start(this.spare);
      this.spare = -1;
    }
    const id = this.next++;
    if (this.end - this.next === REFILL_AT) this.fetchAhead();
    return id;
  }

  /** Resolves once `take` has an id again. */
  more(): Promise<void> {
    return this.fetching ?? Promise.resolve();
  }

  private fetchAhead(): void {
    if (this.fetching || this.spare >= 0) return;
    this.fetching = this.fetchBlock()
      .catch(() => Math.floor(Math.random() * BLOCKS))
      .then((block) => {
        this.fetching = undefined;
        if (this.next >= this.end) this.start(block);
        else this.spare = block;
      });
  }

  /** Ids 1 … RID_BLOCK_SIZE − 1 of the block's slot (0 is never an id). */
  private start(block: number): void {
    const base = (((block % BLOCKS) + BLOCKS) % BLOCKS) * RID_BLOCK_SIZE;
    this.next = base + 1;
    this.end = base + RID_BLOCK_SIZE;
  }
}
