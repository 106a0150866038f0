// Who may talk to PGlite's one backend session next. pglite-socket hands every protocol message
// of every connection to a queue; its own queue (QueryQueueManager) keeps one connection's
// messages together only while a transaction block is open, so outside one the Parse, Bind,
// Describe, Execute and Sync of two `pg` clients interleave on the shared session, and each gets
// pieces of the other's answers ("unnamed prepared statement does not exist", wrong rows).
//
// This queue has the same interface and is put in its place (useSessionQueue). Its rule: a
// connection holds the session from its first message until PGlite answers it ReadyForQuery
// with transaction status idle ('I'), that is until its exchange (a simple query, an extended
// query up to its Sync, or a whole transaction) is over. Meanwhile other connections' messages
// wait, first come first served. A connection that goes away while holding the session gives
// it back after what it left open is aborted, as a real backend does when its client leaves.
//
// Why a queue of our own injected into pglite-socket rather than a socket server of our own:
// the queue is the only part whose policy is wrong; the server's framing, SSL and cancel
// handling, connection limit and idle timeout stay pglite-socket's (pinned, 0.2.17). The price
// is one private field name, checked at start-up (docs/decisions/0011-embedded-store-over-unix-socket.md).
import { Buffer } from 'node:buffer';
import type { PGlite } from '@electric-sql/pglite';
import type { PGLiteSocketServer } from '@electric-sql/pglite-socket';

const READY_FOR_QUERY = 0x5a; // 'Z'
const COMMAND_COMPLETE = 0x43; // 'C'
const SELECT_TAG = Buffer.from('SELECT');
const IDLE = 0x49; // 'I'
const TERMINATE = 0x58; // 'X'
const SYNC = Uint8Array.of(0x53, 0, 0, 0, 4); // 'S', length 4

function simpleQuery(sql: string): Uint8Array {
  const text = Buffer.from(`${sql}\0`);
  const msg = Buffer.alloc(5 + text.length);
  msg[0] = 0x51; // 'Q'
  msg.writeInt32BE(4 + text.length, 1);
  text.copy(msg, 5);
  return msg;
}
const ROLLBACK = simpleQuery('ROLLBACK');

/**
 * Follows the backend's messages through the chunks PGlite streams out and keeps the status of a
 * ReadyForQuery that ends them (undefined when the answer does not end with one), and counts the
 * statements completed that may have written: every CommandComplete whose tag is not `SELECT …`
 * (INSERT, UPDATE, DELETE, COMMIT, …; a SET or SHOW counts too, harmlessly).
 */
export class ReadyWatcher {
  private readonly head = new Uint8Array(5);
  private headLen = 0;
  private left = 0; // body bytes of the current message still to come
  private type = 0;
  /** Bytes of a CommandComplete's tag matched with SELECT's so far; -1 outside a tag being read. */
  private tagAt = -1;
  ready: number | undefined;
  writes = 0;

  feed(chunk: Uint8Array): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.left > 0) {
        if (this.type === READY_FOR_QUERY) this.ready = chunk[i];
        else if (this.tagAt >= 0) this.readTag(chunk, i);
        const n = Math.min(this.left, chunk.length - i);
        this.left -= n;
        i += n;
        continue;
      }
      this.head[this.headLen++] = chunk[i++];
      if (this.headLen < 5) continue;
      this.headLen = 0;
      this.type = this.head[0];
      this.left = new DataView(this.head.buffer).getInt32(1) - 4;
      this.ready = undefined; // another message after a ReadyForQuery: the answer goes on
      if (this.type === COMMAND_COMPLETE) {
        this.tagAt = 0;
        if (this.left <= 0) this.countWrite();
      }
    }
  }

  /** Compares the tag's bytes in chunk from `start` (the message's next ones) with SELECT's. */
  private readTag(chunk: Uint8Array, start: number): void {
    const end = Math.min(chunk.length, start + this.left);
    for (let i = start; i < end && this.tagAt >= 0; i++) {
      if (chunk[i] !== SELECT_TAG[this.tagAt]) this.countWrite();
      else if (++this.tagAt === SELECT_TAG.length) this.tagAt = -1; // a SELECT: read, not written
    }
    // The message ends here before its tag was told apart (every real tag ends in a NUL, which
    // no byte of SELECT matches): not a SELECT.
    if (this.tagAt >= 0 && start + this.left <= chunk.length) this.countWrite();
  }

  /** The tag being read is not a SELECT's: a statement that may have written. */
  private countWrite(): void {
    this.tagAt = -1;
    this.writes++;
  }
}

interface Job {
  handlerId: number;
  run: () => Promise<void>;
  reject: (err: Error) => void;
}

/** Drop-in replacement for pglite-socket's QueryQueueManager (same public methods). */
export class SessionQueue {
  private waiting: Job[] = [];
  /** The connection whose exchange is under way; undefined when the session is idle. */
  private holder: number | undefined;
  private running: number | undefined;
  /**
   * Statements completed on the session that may have written (ReadyWatcher.writes), from every
   * connection: what the journal's tail reads to know that nothing changed since its last read.
   */
  changes = 0;

  constructor(private readonly db: PGlite) {}

  /** One protocol message from a connection; resolves with the bytes of PGlite's answer. */
  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolve, reject) => {
      if (message[0] === TERMINATE) {
        // PGlite ignores Terminate; a connection that sends it while holding the session is
        // leaving it mid-exchange, so abort that exchange now rather than at its close event.
        if (this.holder !== handlerId && this.running !== handlerId) return resolve(0);
        return this.push({ handlerId, reject, run: () => this.release(handlerId).then(() => resolve(0)) });
      }
      this.push({
        handlerId,
        reject,
        run: async () => {
          const watcher = new ReadyWatcher();
          let bytes = 0;
          try {
            await this.exec(message, (data) => {
              bytes += data.length;
              watcher.feed(data);
              onData(data);
            });
          } finally {
            this.changes += watcher.writes; // what completed counts, even if the exchange then failed
          }
          this.holder = watcher.ready === IDLE ? undefined : handlerId;
          resolve(bytes);
        },
      });
    });
  }

  getQueueLength(): number {
    return this.waiting.length;
  }

  /** The connection has gone: its messages not yet run never will. */
  clearQueueForHandler(handlerId: number): void {
    const mine = this.waiting.filter((j) => j.handlerId === handlerId);
    this.waiting = this.waiting.filter((j) => j.handlerId !== handlerId);
    for (const j of mine) j.reject(new Error('Handler disconnected'));
  }

  /** The connection has gone: if it holds the session (or is about to), abort its exchange and free it. */
  clearTransactionIfNeeded(handlerId: number): Promise<void> {
    if (this.holder !== handlerId && this.running !== handlerId) return Promise.resolve();
    return new Promise((resolve, reject) =>
      this.push({ handlerId, reject, run: () => this.release(handlerId).then(resolve) }),
    );
  }

  private push(job: Job): void {
    this.waiting.push(job);
    this.pump();
  }

  private pump(): void {
    if (this.running !== undefined) return;
    // The holder's next message, or else the oldest one waiting.
    const i = this.holder === undefined ? 0 : this.waiting.findIndex((j) => j.handlerId === this.holder);
    if (i < 0 || i >= this.waiting.length) return;
    const [job] = this.waiting.splice(i, 1);
    this.running = job.handlerId;
    job
      .run()
      .catch((err: unknown) => job.reject(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        this.running = undefined;
        this.pump();
      });
  }

  private exec(message: Uint8Array, onData: (data: Uint8Array) => void): Promise<void> {
    return this.db.runExclusive(() => this.db.execProtocolRawStream(message, { onRawData: onData }));
  }

  /** Status of the ReadyForQuery PGlite answers `message` with (undefined if none). */
  private async quiet(message: Uint8Array): Promise<number | undefined> {
    const watcher = new ReadyWatcher();
    await this.exec(message, (data) => watcher.feed(data));
    return watcher.ready;
  }

  private async release(handlerId: number): Promise<void> {
    if (this.holder !== handlerId) return;
    try {
      // ROLLBACK aborts an open transaction block, or the implicit one of an extended query
      // cut off before its Sync. After an error in an extended query the backend skips
      // everything until a Sync (no answer at all), so then Sync and roll back again.
      let status = await this.quiet(ROLLBACK);
      if (status === undefined) status = await this.quiet(SYNC);
      if (status !== IDLE) await this.quiet(ROLLBACK);
    } finally {
      this.holder = undefined;
    }
  }
}

/** Puts a SessionQueue in place of pglite-socket's own queue; call before start(). */
export function useSessionQueue(server: PGLiteSocketServer, db: PGlite): SessionQueue {
  const internals = server as unknown as { queryQueue?: unknown };
  if (typeof (internals.queryQueue as { enqueue?: unknown } | undefined)?.enqueue !== 'function') {
    throw new Error('@electric-sql/pglite-socket has no queryQueue to replace: check session-queue.ts against it');
  }
  const queue = new SessionQueue(db);
  internals.queryQueue = queue;
  return queue;
}
