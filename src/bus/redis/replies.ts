// Replies read on the quiet connection (quiet.ts) without the client library, matched in order
// to the commands written there (docs/decisions/0234-counted-publishes-on-the-quiet-connection.md).
// Once its replies are off, nothing on that connection goes through ioredis's command queue:
// each command whose reply is awaited is written by quiet.ts and queued here, and Redis
// answers them in the order they were written.
//
// A command Redis does not answer within the timeout fails as in doubt (BusTimeoutError, as
// ioredis's own command timeout): its slot stays, so that its late reply, when it comes, is
// matched to it and not to the next command.
//
// A command Redis refuses while replies are off (-BUSY during another client's long script)
// gets no reply at all, not even a late one, and the order would slip by one for good. So each
// run of replies begins with a reply only its own command can get (quiet.ts's confirmation: an
// ECHO of a token). A reply that is not what the oldest command answers is looked for among
// the younger ones: the commands before the one it belongs to were refused in silence, and
// fail; with no owner the order is lost, and so is the connection
// (docs/decisions/0234-counted-publishes-on-the-quiet-connection.md, amended).
import { performance } from 'node:perf_hooks';
import type { Socket } from 'node:net';
import { BusTimeoutError, BusUnavailableError } from '../errors.ts';
import { decimalAt, frameEnd, PushReader, readBefore } from './push-reader.ts';

/** What a reply frame is to the command awaiting it: all of its reply, */
export const DONE = 0;
/** the first of its frames (another follows), */
export const MORE = 1;
/** or not a reply this command gets: the replies are out of order. */
export const WRONG = 2;
export type Verdict = typeof DONE | typeof MORE | typeof WRONG;

/** A command written on the quiet connection whose reply is awaited. */
export interface Awaited {
  /** When it was written (performance.now()). */
  readonly asked: number;
  /**
   * A frame of its reply, `b[start, end)`, whole. `late`: the command has failed already (it
   * timed out), and the frame is only checked.
   */
  reply(b: Buffer, start: number, end: number, late: boolean): Verdict;
  /** Whether the frame is a reply that only this command gets (where the order is found again). */
  claims?(b: Buffer, start: number, end: number): boolean;
  /** No reply will come: its connection closed, Redis did not answer in time, or refused it. */
  fail(err: Error): void;
}

/** A slot whose reply has come: nothing is kept alive by the array until it is compacted. */
const ANSWERED: Awaited = { asked: 0, reply: () => DONE, fail() {} };

/** A RESP error reply, as ioredis names it (the bus tells them apart from outages by name). */
export class ReplyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplyError';
  }
}

/** An integer reply's value, or what else the frame at `start` is (a ReplyError for an error reply). */
export function integerReply(b: Buffer, start: number, end: number): number | Error {
  if (b[start] === 0x3a) return decimalAt(b, start + 1, end);
  return otherReply(b, start, end);
}

function otherReply(b: Buffer, start: number, end: number): Error {
  if (b[start] === 0x2d) return new ReplyError(b.toString('utf8', start + 1, end - 2));
  return new Error(
    `unexpected reply from Redis: ${JSON.stringify(b.toString('latin1', start, Math.min(end, start + 40)))}`,
  );
}

/** frameEnd of a frame that must be whole; -1 where there is none (bytes that are not RESP). */
function wholeFrameEnd(b: Buffer, i: number): number {
  try {
    return frameEnd(b, i);
  } catch {
    return -1;
  }
}

function checkOverdue(q: ReplyQueue): void {
  q.checkOverdue();
}

export class ReplyQueue {
  private slots: Awaited[] = [];
  /** Index of the oldest slot not yet answered. */
  private head = 0;
  /** Slots below this index (and at or past `head`) timed out: their replies are only checked. */
  private failedTo = 0;
  private timer?: NodeJS.Timeout;
  private closed?: Error;
  /** The replies were found out of order: nothing more is read (the connection is replaced). */
  private lost = false;

  constructor(
    /** Longest a command waits for its reply. */
    private readonly timeoutMs: number,
    /** Where frames nobody here waits for go (ioredis's decoder, which reports them). */
    private readonly other: (frames: Buffer) => void = () => {},
    /** The replies are out of order for good (every waiting command has failed by then). */
    private readonly onLost: (why: string) => void = () => {},
  ) {}

  /** Commands still without their reply (those timed out included, until their reply comes). */
  get length(): number {
    return this.slots.length - this.head;
  }

  /** Awaits the reply to the command just written. Fails it at once if the connection is gone. */
  push(a: Awaited): void {
    if (this.closed) return a.fail(this.closed);
    this.slots.push(a);
    this.timer ??= setTimeout(checkOverdue, Math.max(1, a.asked + this.timeoutMs - performance.now()), this);
  }

  /** Whole RESP frames read off the connection, in order. */
  frames(b: Buffer): void {
    let i = 0;
    while (i < b.length) {
      if (this.lost) return;
      if (this.head === this.slots.length) return this.other(b.subarray(i));
      const end = wholeFrameEnd(b, i);
      // Bytes that are not RESP (the reader passes them on as they come): ioredis's decoder
      // reports them, and the connection is dropped.
      if (end < 0) return this.other(b.subarray(i));
      let v = this.slots[this.head].reply(b, i, end, this.head < this.failedTo);
      if (v === WRONG) v = this.realign(b, i, end);
      if (v === WRONG) return this.lose(b.toString('latin1', i, Math.min(b.indexOf(0x0d, i), i + 40)));
      i = end;
      if (v === DONE) this.slots[this.head++] = ANSWERED;
    }
    if (this.head === this.slots.length) {
      this.slots.length = 0;
      this.head = 0;
      this.failedTo = 0;
    } else if (this.head > 1024 && this.head * 2 > this.slots.length) {
      this.slots = this.slots.slice(this.head);
      this.failedTo = Math.max(0, this.failedTo - this.head);
      this.head = 0;
    }
  }

  /**
   * The oldest command's reply was not its own: if a younger command claims the frame, the
   * ones before it got no reply (Redis refused them while replies were off) and fail as in
   * doubt; the frame is then that command's. WRONG if none claims it.
   */
  private realign(b: Buffer, start: number, end: number): Verdict {
    for (let k = this.head + 1; k < this.slots.length; k++) {
      if (!this.slots[k].claims?.(b, start, end)) continue;
      const err = new BusUnavailableError(
        'cluster bus unavailable: Redis refused commands on the quiet connection while its replies were off',
      );
      for (let j = this.head; j < k; j++) {
        const a = this.slots[j];
        this.slots[j] = ANSWERED;
        if (j >= this.failedTo) a.fail(err);
      }
      this.head = k;
      return this.slots[k].reply(b, start, end, k < this.failedTo);
    }
    return WRONG;
  }

  /** `line`: the frame's first line (a type and a length or a short status, no message). */
  private lose(line: string): void {
    this.lost = true;
    this.close(new BusUnavailableError('cluster bus unavailable: replies out of order on the quiet connection'));
    this.onLost(`a reply no command waits for (${JSON.stringify(line)})`);
  }

  /** The connection closed: every command still waiting fails with `err`, and so does any later one. */
  close(err: Error): void {
    this.closed = err;
    clearTimeout(this.timer);
    this.timer = undefined;
    const waiting = this.slots.slice(Math.max(this.head, this.failedTo));
    this.slots = [];
    this.head = 0;
    this.failedTo = 0;
    for (const a of waiting) a.fail(err);
  }

  /** @internal Fails the commands older than the timeout; looks again when the next one would be. */
  checkOverdue(): void {
    this.timer = undefined;
    const now = performance.now();
    let i = Math.max(this.head, this.failedTo);
    for (; i < this.slots.length; i++) {
      const a = this.slots[i];
      if (now - a.asked < this.timeoutMs) break;
      a.fail(new BusTimeoutError(`cluster bus did not answer in time (${this.timeoutMs} ms, quiet connection)`));
    }
    this.failedTo = i;
    if (i < this.slots.length)
      this.timer = setTimeout(checkOverdue, Math.max(1, this.slots[i].asked + this.timeoutMs - now), this);
  }
}

/**
 * Reads `socket`'s replies from now on, in front of ioredis's decoder (which gets what no
 * command here waits for): the queue to await them in. Only when nothing of ioredis's is in
 * flight on it. Undefined if ioredis's decoder was not found, or this socket is read already
 * (nothing changed then).
 */
export function readRepliesDirectly(
  socket: Socket,
  timeoutMs: number,
  onLost: (why: string) => void,
): ReplyQueue | undefined {
  let queue: ReplyQueue | undefined;
  readBefore(socket, (decoder) => {
    const q = (queue = new ReplyQueue(timeoutMs, decoder, onLost));
    return new PushReader(undefined, (frames) => q.frames(frames));
  });
  return queue;
}
