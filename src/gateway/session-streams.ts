// A session's SSE streams on this node. Every event gets an id from the bus's replay
// buffer (`<streamId>:<seq>`, unique per session), so a client that lost a stream resumes it
// with GET + Last-Event-ID, on any node. A session's notification goes to exactly one of its
// streams (the newest), never to all; while none is connected, notifications are still
// buffered for the stream that dropped, for a grace period.
import { randomBytes } from 'node:crypto';
import type { Bus } from '../bus/types.ts';
import type { Hub, Listener } from './hub.ts';
import { oneLine, type SseStream } from './sse.ts';

/** How long a dropped GET stream keeps collecting events for its resumption. */
export const DETACHED_GRACE_MS = 60_000;
/** Clients wait this long before reconnecting a stream the relay ended (SSE `retry`). */
export const RETRY_MS = 1000;

/**
 * A GET stream's id is random; a POST stream's id also says when its request's deadline is
 * (`p.<deadline, base 36>.<random>`), so a GET resuming it on any node knows to follow it to
 * its answer, and for how long at most.
 */
export function newStreamId(post?: { deadline: number }): string {
  const id = randomBytes(6).toString('base64url'); // base64url has no '.': the marks are unambiguous
  return post ? `p.${Math.ceil(post.deadline).toString(36)}.${id}` : id;
}

/** The deadline a POST stream's id carries; undefined for a GET stream's. */
export function postStreamDeadline(streamId: string): number | undefined {
  const m = /^p\.([0-9a-z]{1,11})\./.exec(streamId);
  return m ? parseInt(m[1], 36) : undefined;
}

/** A buffered event that is a JSON-RPC response (what ends a POST stream). */
export function isResponseEvent(data: string): boolean {
  if (!data.includes('"id"')) return false;
  try {
    const m = JSON.parse(data) as Record<string, unknown>;
    return m !== null && typeof m === 'object' && !('method' in m) && ('result' in m || 'error' in m);
  } catch {
    return false;
  }
}

/** One SSE stream whose events carry ids from the replay buffer, in order. */
export class EventStream {
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly bus: Bus,
    readonly sessionId: string,
    readonly streamId: string,
    readonly sse: SseStream | undefined,
  ) {}

  /**
   * Buffers the event (for resumption) and, if connected, writes it with its id. The phone's
   * JSON may have line breaks between tokens; an SSE event's data is one line, so it is
   * flattened here, once, and its replays (get-streams.ts) are one line too.
   */
  send(data: string | Buffer): Promise<void> {
    const text = oneLine(typeof data === 'string' ? data : data.toString('utf8'));
    this.chain = this.chain.then(async () => {
      const id = await this.bus.appendEvent(this.sessionId, this.streamId, text).catch(() => undefined);
      this.sse?.sendLine(text, id);
    });
    return this.chain;
  }

  /** The priming event: an id and empty data, so the client can resume from the very start. */
  async prime(): Promise<void> {
    this.chain = this.chain.then(async () => {
      const id = await this.bus.appendEvent(this.sessionId, this.streamId, '').catch(() => undefined);
      this.sse?.write(`${id ? `id: ${id}\n` : ''}retry: ${RETRY_MS}\ndata: \n\n`);
    });
    return this.chain;
  }

  /** Waits for queued events to be written, then ends the response. */
  async end(): Promise<void> {
    await this.chain;
    this.sse?.end();
  }
}

/** The hub listener of one session on this node: its GET streams. */
export class SessionChannel implements Listener {
  private readonly streams: EventStream[] = [];
  private detached?: { stream: EventStream; timer: NodeJS.Timeout };
  private removeFromHub?: () => void;
  closed = false;

  constructor(
    private readonly bus: Bus,
    readonly sessionId: string,
    private readonly onEmpty: () => void,
    /** The session's credential: a revocation ends the channel. */
    owner: { tokenId?: string; accountId?: string } = {},
    /** GET streams the session may have connected here; a new one beyond closes the oldest. */
    private readonly maxStreams = Infinity,
  ) {
    this.tokenId = owner.tokenId;
    this.accountId = owner.accountId;
  }

  readonly tokenId?: string;
  readonly accountId?: string;

  /** Joins the device's notifications (resolves once the node hears them). */
  async join(hub: Hub, deviceId: string): Promise<void> {
    this.removeFromHub = await hub.listen(deviceId, this);
  }

  get connected(): number {
    return this.streams.length;
  }

  /** GETs between finding this channel and attaching their stream (they keep it from being idle). */
  opening = 0;

  /** No connected stream, none collecting for its resumption, none about to attach. */
  get idle(): boolean {
    return this.streams.length === 0 && this.detached === undefined && this.opening === 0;
  }

  attach(stream: EventStream): void {
    if (this.closed) {
      void stream.end(); // ended (revoked, deleted) while this GET was opening
      return;
    }
    if (this.detached) {
      clearTimeout(this.detached.timer);
      this.detached = undefined;
    }
    this.streams.push(stream);
    stream.sse?.onClose(() => this.detach(stream));
    while (this.streams.length > this.maxStreams) this.streams.shift()!.sse?.end(); // the newest stays
  }

  private detach(stream: EventStream): void {
    const i = this.streams.indexOf(stream);
    if (i < 0) return;
    this.streams.splice(i, 1);
    if (this.streams.length > 0 || this.closed) return;
    // Keep collecting for this stream so a GET with Last-Event-ID finds what it missed.
    const ghost = new EventStream(this.bus, this.sessionId, stream.streamId, undefined);
    const timer = setTimeout(() => this.end(), DETACHED_GRACE_MS);
    timer.unref();
    this.detached = { stream: ghost, timer };
  }

  /**
   * Closes the connections but not the streams (the spec's polling behaviour): clients
   * reconnect with Last-Event-ID, to this node or another, and miss nothing buffered.
   */
  disconnect(): void {
    for (const s of [...this.streams]) s.sse?.end();
  }

  deliver(frame: string | Buffer): void {
    const target = this.streams.at(-1) ?? this.detached?.stream;
    void target?.send(frame);
  }

  end(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.detached) clearTimeout(this.detached.timer);
    this.detached = undefined;
    for (const s of [...this.streams]) void s.end();
    this.streams.length = 0;
    this.removeFromHub?.();
    this.onEmpty();
  }
}
