// A Server-Sent Events stream on a uWS response. Events written in one event-loop turn leave
// in one write at its end (scheduleWrite, docs/decisions/0050-one-write-per-answer.md); with write backpressure, when the
// socket cannot take more, events queue (bounded) until onWritable; a consumer that falls too
// far behind is cut off rather than growing memory without bound.
import { Buffer } from 'node:buffer';
import { KEEP_ALIVE_HINT, type Exchange } from './http.ts';
import { scheduleWrite, type TurnWriter } from '../turn-writes.ts';
import { metrics } from '../metrics.ts';

const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
const EVENT_END = Buffer.from('\n\n');

/** Raw line breaks can only be whitespace between JSON tokens; SSE data must be one line. */
function singleLine(json: Buffer): Buffer {
  if (json.indexOf(0x0a) < 0 && json.indexOf(0x0d) < 0) return json;
  const copy = Buffer.from(json);
  for (let i = 0; i < copy.length; i++) if (copy[i] === 0x0a || copy[i] === 0x0d) copy[i] = 0x20;
  return copy;
}

/** singleLine for text: the same string, not a copy, when it has no line break. */
export function oneLine(json: string): string {
  if (json.indexOf('\n') < 0 && json.indexOf('\r') < 0) return json;
  return json.replace(/[\r\n]/g, ' ');
}

/**
 * Written when uWS reports the socket writable and nothing is queued: a comment line (ignored
 * by SSE parsers) whose write makes uWS send what it holds (see waitWritable).
 */
const DRAIN = ':\n';

// res.cork runs its callback synchronously: one shared callback instead of a closure per write.
let corking: SseStream;
const writeCorking = () => corking.writeNow();

export class SseStream implements TurnWriter {
  /** Bytes not yet handed to uWS: this turn's events, or everything since uWS reported backpressure. */
  private queue: Array<string | Buffer> = [];
  private queuedBytes = 0;
  /** Status line and headers, until the first write. */
  private head?: Record<string, string>;
  private scheduled = false;
  /** uWS holds more than the socket took: wait for onWritable before writing again. */
  private waiting = false;
  /** The onWritable handler is registered (waitWritable). */
  private writableSet = false;
  /** end() was called: the response ends once the queue is written. */
  private ending = false;
  closed = false;
  private keepAlive?: NodeJS.Timeout;
  private closeHandlers: Array<() => void> = [];
  /** Counted in phonebridge_sse_streams while open (every stream, not every session). */
  private counted = false;

  /**
   * `openNow: false` leaves the status line unsent until `open()` or the first event: a GET
   * stream is not shown open before it receives what the phone sends (get-streams.ts).
   */
  constructor(
    private readonly ex: Exchange,
    headers: Record<string, string>,
    keepAliveMs = 15_000,
    openNow = true,
  ) {
    ex.onAbort(() => this.teardown());
    ex.finished = true; // the stream owns the response from here on
    if (ex.aborted) return; // the client is gone: a closed stream (touching res now would crash uWS)
    this.counted = true;
    metrics.sseStreams.inc();
    this.head = headers;
    if (openNow) this.open();
    if (keepAliveMs > 0) {
      this.keepAlive = setInterval(() => this.write(': keep-alive\n\n'), keepAliveMs);
      this.keepAlive.unref();
    }
  }

  /** Sends the status line (end of this turn) so the client sees the stream open before the first event. */
  open(): void {
    if (this.head && !this.closed) this.write(': open\n\n');
  }

  onClose(h: () => void): void {
    if (this.closed) h();
    else this.closeHandlers.push(h);
  }

  /** One JSON-RPC message as an SSE `message` event; its data made one line, whatever its type. */
  send(data: string | Buffer, id?: string): boolean {
    if (typeof data === 'string') return this.sendLine(oneLine(data), id);
    const head = `${id !== undefined ? `id: ${id}\n` : ''}event: message\ndata: `;
    return this.write(Buffer.concat([Buffer.from(head), singleLine(data), EVENT_END]));
  }

  /** send for text already made one line (EventStream.send flattens it once, before buffering). */
  sendLine(line: string, id?: string): boolean {
    return this.write(`${id !== undefined ? `id: ${id}\n` : ''}event: message\ndata: ${line}\n\n`);
  }

  write(chunk: string | Buffer): boolean {
    if (this.closed) return false;
    this.queuedBytes += chunk.length;
    if (this.queuedBytes > MAX_QUEUED_BYTES) {
      this.end();
      return false;
    }
    this.queue.push(chunk);
    this.schedule();
    return true;
  }

  private schedule(): void {
    if (this.scheduled || this.waiting) return;
    this.scheduled = true;
    scheduleWrite(this);
  }

  writeQueued(): void {
    this.scheduled = false;
    if (this.ex.aborted || this.waiting) return;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the writer being flushed, read by the write path to tell its own cork from a foreign one
    corking = this;
    this.ex.res.cork(writeCorking);
  }

  /** Inside this response's cork: everything queued as one chunk, then the end if asked for. */
  writeNow(): void {
    const res = this.ex.res;
    if (this.head) {
      res.writeStatus('200 OK');
      res.writeHeader('Content-Type', 'text/event-stream');
      res.writeHeader('Cache-Control', 'no-cache, no-transform');
      res.writeHeader('X-Accel-Buffering', 'no');
      for (const k in this.head) res.writeHeader(k, this.head[k]);
      // A stream that opens while the node drains says so in its headers: asking uWS to close
      // at end() instead would write `Connection: close` into the chunked body and corrupt it.
      if (this.ex.closing) res.writeHeader('Connection', 'close');
      else res.writeHeader('Keep-Alive', KEEP_ALIVE_HINT); // the idle time after the stream ends
      this.head = undefined;
      this.ex.route?.responded(200);
    }
    if (this.queue.length > 0) {
      const q = this.queue;
      const chunk = q.length === 1 ? q[0] : Buffer.concat(q.map((c) => (typeof c === 'string' ? Buffer.from(c) : c)));
      this.queue = [];
      this.queuedBytes = 0;
      this.ex.route?.bytesOut(chunk);
      if (!res.write(chunk)) return this.waitWritable(); // uWS keeps it buffered
    }
    if (this.ending) res.end(undefined, false); // never closeConnection on a stream: see the headers above
  }

  /**
   * While an onWritable handler is registered, uWS leaves draining what it holds to it (its
   * HttpContext returns from the writable event without draining, and stops polling for
   * writable unless a write failed): so the handler always writes, the queue or DRAIN, and
   * returns that write's result. Registered once; uWS keeps it until the response ends.
   */
  private waitWritable(): void {
    this.waiting = true;
    if (this.writableSet) return;
    this.writableSet = true;
    this.ex.res.onWritable(() => this.writable());
  }

  /** uWS's onWritable: writes there and then (no other socket holds the cork in a writable event, 0050). */
  private writable(): boolean {
    if (!this.waiting || this.ex.aborted) return true;
    this.waiting = false;
    if (this.queue.length === 0 && !this.ending) this.queue.push(DRAIN);
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- as in writeQueued
    corking = this;
    this.ex.res.cork(writeCorking);
    return !this.waiting;
  }

  /**
   * Ends the response (the client may reconnect) once what was written before is out; the
   * stream counts as closed from now on.
   */
  end(): void {
    if (this.closed) return;
    this.ending = true;
    if (this.queuedBytes > MAX_QUEUED_BYTES) {
      // A consumer this far behind is cut off: what it has not taken is dropped.
      this.queue = [];
      this.queuedBytes = 0;
    }
    if (!this.ex.aborted) this.schedule();
    this.teardown();
  }

  private teardown(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.counted) metrics.sseStreams.dec();
    this.counted = false;
    clearInterval(this.keepAlive);
    if (!this.ending) this.queue = [];
    for (const h of this.closeHandlers) h();
    this.closeHandlers = [];
  }
}
