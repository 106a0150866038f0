// Replies read on the quiet connection (quiet.ts) without the client library, matched in order
// to the commands written there (docs/decisions/0234-counted-publishes-on-the-quiet-connection.md).
// Once its replies are off, nothing on that connection goes through ioredis's command queue:
// each command whose reply is awaited is written by quiet.ts and queued here, and Redis
// answers them in the order they were written.
//
// A command Redis does not answer within the timeout fails as in doubt (BusTimeoutError, as
// ioredis's own command timeout): its slot stays, so that its late reply, when it comes, is
// matched to it and not to the next command.
import type { Socket } from 'node:net';
import { BusTimeoutError } from '../errors.ts';
import { decimalAt, frameEnd, PushReader, readBefore } from './push-reader.ts';

/** A command written on the quiet connection whose reply is awaited. */
export interface Awaited {
  /** When it was written (performance.now()). */
  readonly asked: number;
  /** Its reply: the RESP frame `b[start, end)`, whole. */
  reply(b: Buffer, start: number, end: number): void;
  /** No reply will come: its connection closed, or Redis did not answer in time. */
  fail(err: Error): void;
}

/** A reply slot whose command already failed (timed out): its reply is read and dropped. */
const LATE: Awaited = { asked: 0, reply() {}, fail() {} };

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

/** Undefined for a simple-string reply (`+OK`), else what the frame is instead. */
export function okReply(b: Buffer, start: number, end: number): Error | undefined {
  return b[start] === 0x2b ? undefined : otherReply(b, start, end);
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
  private timer?: NodeJS.Timeout;
  private closed?: Error;

  constructor(
    /** Longest a command waits for its reply. */
    private readonly timeoutMs: number,
    /** Where frames nobody here waits for go (ioredis's decoder, which reports them). */
    private readonly other: (frames: Buffer) => void = () => {},
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
      if (this.head === this.slots.length) return this.other(b.subarray(i));
      const end = wholeFrameEnd(b, i);
      // Bytes that are not RESP (the reader passes them on as they come): ioredis's decoder
      // reports them, and the connection is dropped.
      if (end < 0) return this.other(b.subarray(i));
      const a = this.slots[this.head];
      this.slots[this.head++] = LATE; // not kept alive by the array until it is compacted
      a.reply(b, i, end);
      i = end;
    }
    if (this.head === this.slots.length) {
      this.slots.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.slots.length) {
      this.slots = this.slots.slice(this.head);
      this.head = 0;
    }
  }

  /** The connection closed: every command still waiting fails with `err`, and so does any later one. */
  close(err: Error): void {
    this.closed = err;
    clearTimeout(this.timer);
    this.timer = undefined;
    const waiting = this.slots.slice(this.head);
    this.slots = [];
    this.head = 0;
    for (const a of waiting) a.fail(err);
  }

  /** @internal Fails the commands older than the timeout; looks again when the next one would be. */
  checkOverdue(): void {
    this.timer = undefined;
    const now = performance.now();
    let i = this.head;
    for (; i < this.slots.length; i++) {
      const a = this.slots[i];
      if (a === LATE) continue;
      if (now - a.asked < this.timeoutMs) break;
      this.slots[i] = LATE;
      a.fail(new BusTimeoutError(`cluster bus did not answer in time (${this.timeoutMs} ms, quiet connection)`));
    }
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
export function readRepliesDirectly(socket: Socket, timeoutMs: number): ReplyQueue | undefined {
  let queue: ReplyQueue | undefined;
  readBefore(socket, (decoder) => {
    const q = (queue = new ReplyQueue(timeoutMs, decoder));
    return new PushReader(undefined, (frames) => q.frames(frames));
  });
  return queue;
}
