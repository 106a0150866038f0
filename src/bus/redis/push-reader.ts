// The subscriber connection's pub/sub messages, read off the socket without the client
// library's reply decoder (docs/decisions/0233-pub-sub-messages-read-directly.md). Every
// cross-node request and answer arrives as one such message; ioredis decodes each into an
// array of Buffers through a general RESP decoder, a closure per reply and two events, which
// cost a cross-node call about 5 µs of the two nodes' CPU (docs/BENCHMARKS.md, "Pub/sub
// messages read directly").
//
// The socket's bytes are cut into whole RESP frames here. A `message` / `smessage` push goes
// straight to `onMessage` (the bytes read and where its channel and payload are in them, no
// copy and no view); every other frame (replies to SUBSCRIBE, UNSUBSCRIBE, PING, errors) goes
// to ioredis's own decoder, always whole, so its decoder is never left half-way through a
// frame and its command queue sees every reply it waits for.
import { Buffer } from 'node:buffer';
import type { Socket } from 'node:net';
import { bytesAre, bytesOf } from '../../protocol/json-bytes.ts';
import { copyOf } from '../../protocol/byte-calls.ts';
import { readTurn } from '../../turn-writes.ts';

const CR = 0x0d;
/** RESP3 push `>` and RESP2 array `*`: a message is one of these of three bulk strings. */
const PUSH = 0x3e;
const ARRAY = 0x2a;
const BULK = 0x24;

/**
 * Where the RESP frame starting at `i` ends (the index after it), or, if `b` does not hold all
 * of it yet, minus the least length `b` must reach before it can (as far as is known: at
 * least one more byte). Throws on a byte that starts no RESP type.
 */
export function frameEnd(b: Buffer, i: number): number {
  const t = b[i];
  const line = lineEnd(b, i + 1);
  if (line < 0) return -(b.length + 1);
  switch (t) {
    case 0x2b: // + simple string
    case 0x2d: // - error
    case 0x3a: // : integer
    case 0x5f: // _ null
    case 0x2c: // , double
    case 0x23: // # boolean
    case 0x28: // ( big number
      return line;
    case BULK:
    case 0x21: // ! bulk error
    case 0x3d: // = verbatim string
      return bulkEnd(b, i, line);
    case ARRAY:
    case PUSH:
    case 0x7e: // ~ set
    case 0x25: // % map
    case 0x7c: {
      // | attribute (its pairs, then the value it describes)
      const n = decimalAt(b, i + 1, line);
      let count = n < 0 ? 0 : t === 0x25 || t === 0x7c ? 2 * n : n;
      if (t === 0x7c) count++;
      let j = line;
      for (let k = 0; k < count; k++) {
        if (j >= b.length) return -(j + 1);
        const e = frameEnd(b, j);
        if (e < 0) return e;
        j = e;
      }
      return j;
    }
    default:
      throw new Error(`not a RESP frame: byte ${t} at ${i}`);
  }
}

/**
 * The index after the CRLF of the line starting at `i`, or -1 if it is not all there. Scanned
 * here: a RESP line is a few bytes, and `Buffer#indexOf` is a call into C++ that costs more
 * than the scan (two per message).
 */
function lineEnd(b: Buffer, i: number): number {
  const n = b.length;
  while (i < n && b[i] !== CR) i++;
  return i + 1 >= n ? -1 : i + 2;
}

/**
 * The end of the bulk string at `i` whose header line ends at `line` (`line` itself for a
 * null), or minus the length `b` must reach.
 */
function bulkEnd(b: Buffer, i: number, line: number): number {
  const n = decimalAt(b, i + 1, line);
  if (n < 0) return line; // $-1: null
  const end = line + n + 2;
  return end <= b.length ? end : -end;
}

/** The signed decimal between `i` and the CRLF before `end`. */
export function decimalAt(b: Buffer, i: number, end: number): number {
  let n = 0;
  let neg = false;
  for (let k = i; k < end - 2; k++) {
    const c = b[k];
    if (c === 0x2d) neg = true;
    else n = n * 10 + (c - 0x30);
  }
  return neg ? -n : n;
}

const MESSAGE = bytesOf('$7\r\nmessage\r\n');
const SMESSAGE = bytesOf('$8\r\nsmessage\r\n');

/** Where a pub/sub message's fields are, as `messageAt` found them. */
export interface MessageAt {
  channelStart: number;
  channelEnd: number;
  payloadStart: number;
  payloadEnd: number;
}

/**
 * If a `message` or `smessage` push starts at `i`: where it ends, its fields put in `at`.
 * 0 if what starts there is some other frame; minus the least length `b` must reach, as
 * frameEnd, if it may be a message not all read yet.
 */
export function messageAt(b: Buffer, i: number, at: MessageAt): number {
  if (b[i] !== PUSH && b[i] !== ARRAY) return 0;
  if (i + 4 > b.length) return -(i + 4);
  if (b[i + 1] !== 0x33 || b[i + 2] !== CR) return 0;
  let j = i + 4;
  const kind = b[j + 1] === 0x37 ? MESSAGE : SMESSAGE;
  if (j + kind.length <= b.length) {
    if (!bytesAre(b, j, kind)) return 0;
    j += kind.length;
  } else
    for (let k = 0; k < kind.length; k++, j++) {
      if (j >= b.length) return -(j + 1);
      if (b[j] !== kind[k]) return 0;
    }
  const channelStart = bulkStart(b, j);
  if (channelStart <= 0) return channelStart;
  const channelEnd = channelStart + bulkBytes;
  if (channelEnd + 2 > b.length) return -(channelEnd + 2);
  const payloadStart = bulkStart(b, channelEnd + 2);
  if (payloadStart <= 0) return payloadStart;
  const payloadEnd = payloadStart + bulkBytes;
  if (payloadEnd + 2 > b.length) return -(payloadEnd + 2);
  at.channelStart = channelStart;
  at.channelEnd = channelEnd;
  at.payloadStart = payloadStart;
  at.payloadEnd = payloadEnd;
  return payloadEnd + 2;
}

/** The length of the bulk string bulkStart last found. */
let bulkBytes = 0;

/**
 * Where the bytes of the non-null bulk string at `i` start (its length then in `bulkBytes`);
 * 0 if there is none there, or minus the length `b` must reach to tell.
 */
function bulkStart(b: Buffer, i: number): number {
  if (i >= b.length) return -(i + 1);
  if (b[i] !== BULK) return 0;
  const line = lineEnd(b, i + 1);
  if (line < 0) return -(b.length + 1);
  const n = decimalAt(b, i + 1, line);
  if (n < 0) return 0;
  bulkBytes = n;
  return line;
}

/**
 * Cuts a byte stream into RESP frames: messages to `onMessage` (if given), the rest (whole
 * frames) to `other`. Bytes of an unfinished frame wait for the next chunk, gathered without copying
 * until the frame's known length has arrived.
 */
export class PushReader {
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Bytes the unfinished frame needs at least. */
  private need = 0;
  /** After bytes that are not RESP, everything goes to `other` (its decoder reports them). */
  private broken = false;
  private readonly at: MessageAt = { channelStart: 0, channelEnd: 0, payloadStart: 0, payloadEnd: 0 };

  /**
   * `onMessage`: each message, as the bytes read and where its fields are in them (`at`, valid
   * during the call): a view of a field costs more than most readers do with it.
   */
  constructor(
    private readonly onMessage: ((b: Buffer, at: Readonly<MessageAt>) => void) | undefined,
    private readonly other: (frames: Buffer) => void,
  ) {}

  write(chunk: Buffer): void {
    if (this.broken) return this.other(chunk);
    let b = chunk;
    if (this.heldBytes) {
      this.held.push(chunk);
      this.heldBytes += chunk.length;
      if (this.heldBytes < this.need) return;
      b = Buffer.concat(this.held, this.heldBytes);
      this.held = [];
      this.heldBytes = 0;
    }
    let i = 0;
    // Consecutive frames for `other` go to it together.
    let otherFrom = -1;
    const at = this.at;
    const onMessage = this.onMessage;
    while (i < b.length) {
      let end = onMessage ? messageAt(b, i, at) : 0;
      if (end > 0 && onMessage) {
        if (otherFrom >= 0) {
          this.other(b.subarray(otherFrom, i));
          otherFrom = -1;
        }
        onMessage(b, at);
        i = end;
        continue;
      }
      if (end === 0)
        try {
          end = frameEnd(b, i);
        } catch {
          this.broken = true;
          return this.other(b.subarray(otherFrom < 0 ? i : otherFrom));
        }
      if (end < 0) {
        if (otherFrom >= 0) this.other(b.subarray(otherFrom, i));
        this.need = -end - i;
        // A copy: the rest of a large read is not kept alive by a small unfinished frame.
        const rest = Buffer.from(b.subarray(i));
        this.held = [rest];
        this.heldBytes = rest.length;
        return;
      }
      if (otherFrom < 0) otherFrom = i;
      i = end;
    }
    if (otherFrom >= 0) this.other(b.subarray(otherFrom));
  }
}

/**
 * Puts a PushReader in front of ioredis's decoder on `socket`, a subscriber connection that
 * has just become ready (nothing is in flight on it then: subscriptions are made after this).
 * If ioredis's decoder is not found, nothing is changed and ioredis goes on delivering
 * messages itself. Returns whether the reader was put in place.
 */
export function readPushesDirectly(socket: Socket, onMessage: (b: Buffer, at: Readonly<MessageAt>) => void): boolean {
  return readBefore(socket, (decoder) => new PushReader(onMessage, decoder));
}

/**
 * Makes `make`'s reader the first to read `socket`'s bytes, given ioredis's decoder to pass on
 * to. ioredis 6 prepends its decoder to the socket's `data` listeners; if that is not what is
 * found, nothing is changed and false returned. A second call on one socket changes nothing.
 *
 * Where the socket's handle can (a TCP or Unix socket, not a TLS one), it then reads into one
 * buffer of ours and hands each read to the reader as a copy of its bytes, without the stream's
 * `data` event (readIntoOwnBuffer); elsewhere the reader is the first `data` listener. Any
 * other `data` listener (a `once` of ioredis's) is called after the reader, as it was after
 * the decoder.
 */
export function readBefore(
  socket: Socket,
  make: (decoder: (chunk: Buffer) => void) => { write(chunk: Buffer): void },
): boolean {
  if (readDirectly.has(socket)) return true;
  const [decoder] = socket.listeners('data') as Array<(chunk: Buffer) => void>;
  if (typeof decoder !== 'function') return false;
  const reader = make(decoder);
  const others = socket.rawListeners('data').filter((l) => l !== decoder) as Array<(chunk: Buffer) => void>;
  socket.removeAllListeners('data');
  readDirectly.add(socket);
  const deliver = (chunk: Buffer) => {
    reader.write(chunk);
    if (socket.listenerCount('data') > 0) socket.emit('data', chunk);
  };
  // libuv calls a read into our buffer straight from the socket's poll, outside every uWS
  // callback: the answers and phone frames it queues go out as it ends (readTurn). Read through
  // the stream, a chunk may be handed on later, from inside another callback: the check phase.
  const own = readIntoOwnBuffer(socket, (chunk) => readTurn(deliver, chunk));
  if (!own) {
    // Added with the stream's own `on`, which marks it as read by a `data` listener. ioredis adds
    // its decoder with prependListener, which does not: a flowing socket without that mark keeps
    // each chunk it reads in its buffer and hands it on a tick later, through `readable` and
    // `read()`, instead of at once (Node 20's Readable `addChunk`).
    const state = readState(socket);
    socket.on('data', (chunk: Buffer) => {
      reader.write(chunk);
      // Marked as if a "read more" were scheduled, so the stream schedules none after this chunk.
      if (state) state.readingMore = true;
    });
  }
  for (const l of others) socket.on('data', l);
  return true;
}

/** How much one read of a socket read into our own buffer takes at most (libuv's own size). */
export const OWN_READ_BYTES = 64 * 1024;

/**
 * Turns a connected socket to reading into one buffer of ours, as a socket made with Node's
 * `onread` option does (ioredis makes its sockets without it): `onChunk` gets each read's bytes
 * as a new Buffer of its own, the buffer read into is used again for the next read, and the
 * stream's `data` event is not emitted. False (nothing changed) where the socket's handle has
 * no such mode (a TLS socket's), the socket already reads so or has bytes waiting in its
 * stream, or this Node keeps the option's state elsewhere than where `onread` puts it.
 *
 * Why: a read into a buffer Node makes costs a new ArrayBuffer with its backing store, its
 * copy down to the bytes read, and the stream's push and `data` event, about 5 thousand
 * instructions a read; this mode, the copy into a Buffer from Node's pool included, about 1.6
 * (docs/decisions/0265-redis-sockets-read-into-our-own-buffer.md). Each chunk is a copy, as
 * before: what a reader keeps of it stays as it was when read.
 */
export function readIntoOwnBuffer(socket: Socket, onChunk: (chunk: Buffer) => void): boolean {
  const keys = onreadKeys(socket);
  const handle = (socket as { _handle?: { useUserBuffer?: unknown } | null })._handle;
  if (!keys || !handle || typeof handle.useUserBuffer !== 'function') return false;
  const props = socket as unknown as Record<symbol, unknown>;
  if (props[keys.buffer] !== null || props[keys.callback] !== null || props[keys.generator] !== null) return false;
  if (socket.connecting || socket.destroyed || socket.readableLength > 0) return false;
  const into = Buffer.allocUnsafeSlow(OWN_READ_BYTES);
  const memory = into.buffer;
  try {
    (handle.useUserBuffer as (b: Buffer) => void).call(handle, into);
  } catch {
    return false;
  }
  // Node's `onStreamRead` calls the callback with the number of bytes read into the buffer,
  // for as long as the buffer is set.
  props[keys.callback] = (nread: number) => onChunk(copyOf(memory, nread));
  props[keys.buffer] = into;
  return true;
}

/**
 * The keys of the socket's own properties that Node's `onread` option sets (`net.Socket`: the
 * buffer, its callback and its generator, null on a socket made without it), by their
 * symbols' descriptions; undefined if this Node has not all three.
 */
function onreadKeys(socket: Socket): { buffer: symbol; callback: symbol; generator: symbol } | undefined {
  let buffer: symbol | undefined;
  let callback: symbol | undefined;
  let generator: symbol | undefined;
  for (const key of Object.getOwnPropertySymbols(socket)) {
    if (key.description === 'kBuffer') buffer = key;
    else if (key.description === 'kBufferCb') callback = key;
    else if (key.description === 'kBufferGen') generator = key;
  }
  return buffer && callback && generator ? { buffer, callback, generator } : undefined;
}

/**
 * The socket's Readable state where it has Node's `readingMore` flag, else undefined (then
 * nothing is changed). After each chunk it hands on, a flowing Readable schedules a "read more"
 * for the next tick (Node 20's `maybeReadMore`): a `process.nextTick` whose entry is an object
 * literal with symbol keys that the runtime defines one by one, then a `read(0)` that finds
 * nothing to do — 7 to 9 thousand instructions per chunk with the tick queue's run
 * (docs/BENCHMARKS.md, "The stream's read-more per chunk"). A socket reads from its handle
 * whenever it flows, and these readers take every chunk as it comes (nothing is buffered, so a
 * read is never stopped for a full buffer), so the scheduled read never has anything to start:
 * with the flag kept set it is not scheduled. A read the flag would skip is still started by
 * `resume` and `read` themselves.
 */
function readState(socket: Socket): { readingMore: boolean } | undefined {
  const state = (socket as { _readableState?: { readingMore?: unknown } })._readableState;
  return state && typeof state.readingMore === 'boolean' ? (state as { readingMore: boolean }) : undefined;
}

/** Sockets a reader of ours already reads (a second `ready` on one socket changes nothing). */
const readDirectly = new WeakSet<Socket>();
