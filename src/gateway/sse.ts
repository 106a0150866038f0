// A Server-Sent Events stream on a uWS response, with write backpressure: when the socket
// cannot take more, events queue (bounded) until onWritable; a consumer that falls too far
// behind is cut off rather than growing memory without bound.
import type { Exchange } from './http.ts';
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

export class SseStream {
  private queue: Array<string | Buffer> = [];
  private queuedBytes = 0;
  private waiting = false;
  closed = false;
  private keepAlive?: NodeJS.Timeout;
  private closeHandlers: Array<() => void> = [];
  /** Counted in phonebridge_sse_streams while open (every stream, not every session). */
  private counted = false;

  constructor(
    private readonly ex: Exchange,
    headers: Record<string, string>,
    keepAliveMs = 15_000,
  ) {
    ex.onAbort(() => this.teardown());
    ex.finished = true; // the stream owns the response from here on
    if (ex.aborted) return; // the client is gone: a closed stream (touching res now would crash uWS)
    this.counted = true;
    metrics.sseStreams.inc();
    ex.res.cork(() => {
      ex.res.writeStatus('200 OK');
      ex.res.writeHeader('Content-Type', 'text/event-stream');
      ex.res.writeHeader('Cache-Control', 'no-cache, no-transform');
      ex.res.writeHeader('X-Accel-Buffering', 'no');
      for (const k in headers) ex.res.writeHeader(k, headers[k]);
      // Sends the headers now so clients see the stream open before the first event.
      ex.res.write(': open\n\n');
    });
    if (keepAliveMs > 0) {
      this.keepAlive = setInterval(() => this.write(': keep-alive\n\n'), keepAliveMs);
      this.keepAlive.unref();
    }
  }

  onClose(h: () => void): void {
    if (this.closed) h();
    else this.closeHandlers.push(h);
  }

  /** One JSON-RPC message as an SSE `message` event. */
  send(data: string | Buffer, id?: string): boolean {
    const head = `${id !== undefined ? `id: ${id}\n` : ''}event: message\ndata: `;
    if (typeof data === 'string') return this.write(`${head}${data}\n\n`);
    return this.write(Buffer.concat([Buffer.from(head), singleLine(data), EVENT_END]));
  }

  write(chunk: string | Buffer): boolean {
    if (this.closed) return false;
    if (this.waiting) {
      this.queuedBytes += chunk.length;
      if (this.queuedBytes > MAX_QUEUED_BYTES) {
        this.end();
        return false;
      }
      this.queue.push(chunk);
      return true;
    }
    let ok = true;
    this.ex.res.cork(() => {
      ok = this.ex.res.write(chunk);
    });
    if (!ok) this.waitWritable();
    return true;
  }

  private waitWritable(): void {
    this.waiting = true;
    this.ex.res.onWritable(() => {
      while (this.queue.length > 0) {
        const next = this.queue.shift()!;
        this.queuedBytes -= next.length;
        if (!this.ex.res.write(next)) return false; // uWS keeps it buffered; wait again
      }
      this.waiting = false;
      return true;
    });
  }

  /** Ends the response (the client may reconnect). */
  end(): void {
    if (this.closed) return;
    if (!this.ex.aborted) this.ex.res.cork(() => this.ex.res.end());
    this.teardown();
  }

  private teardown(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.counted) metrics.sseStreams.dec();
    this.counted = false;
    clearInterval(this.keepAlive);
    this.queue = [];
    for (const h of this.closeHandlers) h();
    this.closeHandlers = [];
  }
}
