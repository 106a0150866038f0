// Per-call deadlines without a Node Timeout per call (docs/decisions/0135-deadline-lists.md).
// Calls started with the same delay expire in the order they started, so each delay keeps
// its calls in a list threaded through the calls themselves (no allocation per call) and one
// timer for the list's head; cancelling unlinks the call in O(1). The timer is not moved when
// its head goes: it fires, finds the new head not due and is armed again for it, at most once
// per delay while calls come and go.
import { performance } from 'node:perf_hooks';

/** The fields an object carries to sit in a Deadlines list; start them `undefined`/0. */
export interface Timed {
  dueAt: number;
  prevDue: Timed | undefined;
  nextDue: Timed | undefined;
  dueList: object | undefined;
}

export class Deadlines<T extends Timed> {
  private readonly lists = new Map<number, DeadlineList<T>>();

  /** `expired(item)` runs once an item's delay has passed without a cancel. */
  constructor(private readonly expired: (item: T) => void) {}

  /** Starts `item`'s deadline, `delayMs` from now; an item already started is moved. */
  start(item: T, delayMs: number): void {
    this.cancel(item);
    let list = this.lists.get(delayMs);
    if (!list) this.lists.set(delayMs, (list = new DeadlineList(this, delayMs)));
    list.add(item);
  }

  cancel(item: T): void {
    (item.dueList as DeadlineList<T> | undefined)?.remove(item);
  }

  /** Forgets every item, none expired, and stops every timer (the owner is closing). */
  clear(): void {
    for (const list of this.lists.values()) list.clear();
    this.lists.clear();
  }

  /** Items waiting, over every delay. */
  get size(): number {
    let n = 0;
    for (const l of this.lists.values()) n += l.size;
    return n;
  }

  /** @internal */
  expire(item: T): void {
    this.expired(item);
  }

  /** @internal A list with nothing left and no timer is forgotten, so one-off delays do not pile up. */
  emptied(list: DeadlineList<T>): void {
    if (this.lists.get(list.delayMs) === list) this.lists.delete(list.delayMs);
  }
}

function fireList(list: { fire(): void }): void {
  list.fire();
}

class DeadlineList<T extends Timed> {
  size = 0;
  private head?: T;
  private tail?: T;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly owner: Deadlines<T>,
    readonly delayMs: number,
  ) {}

  add(item: T): void {
    const now = performance.now();
    item.dueAt = now + this.delayMs;
    item.dueList = this;
    item.prevDue = this.tail;
    item.nextDue = undefined;
    if (this.tail) this.tail.nextDue = item;
    else this.head = item;
    this.tail = item;
    this.size++;
    if (!this.timer) this.arm(this.delayMs);
  }

  remove(item: T): void {
    if (item.dueList !== this) return;
    const prev = item.prevDue as T | undefined;
    const next = item.nextDue as T | undefined;
    if (prev) prev.nextDue = next;
    else this.head = next;
    if (next) next.prevDue = prev;
    else this.tail = prev;
    item.prevDue = item.nextDue = item.dueList = undefined;
    this.size--;
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (let h = this.head; h; h = this.head) this.remove(h);
  }

  fire(): void {
    this.timer = undefined;
    const now = performance.now();
    for (let h = this.head; h && h.dueAt <= now; h = this.head) {
      this.remove(h);
      this.owner.expire(h); // may start or cancel others, in this list too
    }
    if (this.timer) return;
    if (this.head) this.arm(this.head.dueAt - now);
    else this.owner.emptied(this);
  }

  private arm(ms: number): void {
    // Node's timers run on the loop's cached clock, a little behind performance.now(): a head
    // found not quite due is looked at again a millisecond later.
    this.timer = setTimeout(fireList, Math.max(1, Math.ceil(ms)), this);
    // The calls' own sockets keep the process alive, not their deadlines.
    this.timer.unref();
  }
}
