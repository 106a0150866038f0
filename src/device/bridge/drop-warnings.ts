// Warnings about what the bridge dropped from its upstream, rate-limited: a stdio server that
// writes its logs to stdout would otherwise cost one warning per line it logs. Counts only: no
// line is kept, and the memory is one counter per kind of drop.

/** A kind of drop: its warning, then its words for the count of one and of many. */
export interface DropKind {
  warning: string;
  one: string;
  many: string;
}

export interface DropWarningOptions {
  /** Drops of one kind warned about one by one before they are only counted (3). */
  first?: number;
  /** How often the counts are logged while drops go on (30 s). */
  summaryEveryMs?: number;
}

export class DropWarnings {
  private readonly counts = new Map<DropKind, { warned: number; more: number }>();
  private readonly first: number;
  private readonly summaryEveryMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly warn: (message: string) => void,
    options: DropWarningOptions = {},
  ) {
    this.first = options.first ?? 3;
    this.summaryEveryMs = options.summaryEveryMs ?? 30_000;
  }

  dropped(kind: DropKind): void {
    let count = this.counts.get(kind);
    if (!count) this.counts.set(kind, (count = { warned: 0, more: 0 }));
    if (count.warned < this.first) {
      count.warned++;
      this.warn(kind.warning);
      return;
    }
    count.more++;
    this.timer ??= setInterval(() => this.summarize(), this.summaryEveryMs).unref();
  }

  /** Logs the counts since the last summary; a period with none stops the timer until the next drop. */
  summarize(): void {
    let counted = false;
    for (const [kind, count] of this.counts) {
      if (count.more === 0) continue;
      this.warn(`dropped ${count.more} more ${count.more === 1 ? kind.one : kind.many}`);
      count.more = 0;
      counted = true;
    }
    if (!counted) this.stop();
  }

  /** The counts not logged yet are logged now (the bridge is closing). */
  close(): void {
    this.summarize();
    this.stop();
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
