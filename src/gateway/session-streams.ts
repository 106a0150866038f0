// A session's SSE streams on this node. Every event gets an id from the bus's replay
// buffer (`<streamId>:<seq>`, unique per session), so a client that lost a stream resumes it
// with GET + Last-Event-ID, on any node. A session's notification goes to exactly one of its
// streams (the newest), never to all; while none is connected, notifications are still
// buffered for the stream that dropped, for a grace period (a stand-in). Across nodes the
// newest is the one announced last, and a resume elsewhere ends the stand-in here
// (get-streams.ts, docs/decisions/0246-get-stream-handover.md).
import { randomBytes } from 'node:crypto';
import type { Bus, ReplayEvent } from '../bus/types.ts';
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
  /**
   * A resuming stream's events from its attachment until its replay is written: buffered
   * (they have their ids) but not written yet (`holdForReplay`, `release`).
   */
  private held?: Array<{ text: string; id?: string }>;
  /**
   * The ids of a resumed stream's replay: an event appended before the replay was read but
   * written after it (held, or its append answered late) is in it already.
   */
  private replayed?: Set<string>;

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
      if (this.held) this.held.push({ text, id });
      else this.write(text, id);
    });
    return this.chain;
  }

  /** Writes an event unless the replay wrote it already. */
  private write(text: string, id: string | undefined): void {
    if (id !== undefined && this.replayed?.has(id)) return;
    this.sse?.sendLine(text, id);
  }

  /**
   * A resuming stream: events delivered from now on are buffered but not written until
   * `release`, which writes the replay first (docs/decisions/0246-get-stream-handover.md).
   */
  holdForReplay(): void {
    this.held ??= [];
  }

  /**
   * Writes what the stream missed (read from the replay buffer after it was attached), then
   * the events held meanwhile: each once, in order, whichever of the two has it.
   */
  release(replayed: readonly ReplayEvent[]): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const e of replayed) if (e.data) this.sse?.send(e.data, e.id);
    // The replay is a snapshot of the buffer: a held event not in it came after all of it.
    this.replayed = new Set(replayed.map((e) => e.id));
    for (const e of held) this.write(e.text, e.id);
  }

  /** Resolves once the events queued so far are buffered (and written, if connected). */
  settled(): Promise<void> {
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

/** Resolves once the streams' queued events are buffered; undefined when there are none. */
function settled(...streams: Array<EventStream | undefined>): Promise<void> | undefined {
  const some = streams.filter((s) => s !== undefined);
  return some.length > 0 ? Promise.all(some.map((s) => s.settled())).then(() => {}) : undefined;
}

/** The hub listener of one session on this node: its GET streams. */
export class SessionChannel implements Listener {
  private readonly streams: EventStream[] = [];
  private detached?: { stream: EventStream; timer: NodeJS.Timeout };
  private removeFromHub?: () => void;
  closed = false;
  /**
   * The session's newest GET stream is on another node (its `stream_live` came after this
   * node's last): the session's notifications go there, none to the streams here, which stay
   * open (docs/decisions/0246-get-stream-handover.md).
   */
  elsewhere = false;

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
    const remove = await hub.listen(deviceId, this);
    // Ended while the device was being subscribed (the session deleted, its key revoked): end()
    // had nothing to remove yet.
    if (this.closed) remove();
    else this.removeFromHub = remove;
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

  /**
   * Connects a stream: it gets the session's notifications from now on, and the stand-in (if
   * any) stops collecting. When it took over a stand-in, or an earlier connection of the same
   * stream, returns a promise that resolves once what those buffered is in the replay buffer,
   * so a replay read after that has it (docs/decisions/0246-get-stream-handover.md).
   */
  attach(stream: EventStream): Promise<void> | undefined {
    if (this.closed) {
      void stream.end(); // ended (revoked, deleted) while this GET was opening
      return undefined;
    }
    const standIn = this.detached?.stream;
    if (this.detached) {
      clearTimeout(this.detached.timer);
      this.detached = undefined;
    }
    // The same stream's earlier connection, not seen closing yet: what it still buffers counts too.
    const earlier = this.dropStream(stream.streamId);
    this.elsewhere = false;
    this.streams.push(stream);
    stream.sse?.onClose(() => this.detach(stream));
    while (this.streams.length > this.maxStreams) this.streams.shift()!.sse?.end(); // the newest stays
    return settled(standIn, earlier);
  }

  /**
   * Another node connected one of this session's GET streams (get-streams.ts): notifications
   * now go there, so the stand-in here stops collecting (else a resume would get them once per
   * node), an earlier connection of that very stream here, not seen closing yet, ends, and the
   * streams still connected here get none until one of them is the newest again.
   * When either was here, returns a promise that resolves once what they buffered is in the
   * replay buffer (the other node waits for that before it reads the buffer).
   */
  liveElsewhere(streamId: string): Promise<void> | undefined {
    const standIn = this.detached?.stream;
    if (this.detached) {
      clearTimeout(this.detached.timer);
      this.detached = undefined;
    }
    const earlier = this.dropStream(streamId);
    this.elsewhere = true;
    if (this.idle) this.end();
    return settled(standIn, earlier);
  }

  /** Ends a connection of this stream id without leaving a stand-in for it; returns it. */
  private dropStream(streamId: string): EventStream | undefined {
    const i = this.streams.findIndex((s) => s.streamId === streamId);
    if (i < 0) return undefined;
    const [old] = this.streams.splice(i, 1);
    old.sse?.end();
    return old;
  }

  private detach(stream: EventStream): void {
    const i = this.streams.indexOf(stream);
    if (i < 0) return;
    this.streams.splice(i, 1);
    if (this.streams.length > 0 || this.closed) return;
    // Not the session's newest stream: nothing was going to it, nothing to collect for it.
    if (this.elsewhere) {
      if (this.idle) this.end();
      return;
    }
    // Keep collecting for this stream so a GET with Last-Event-ID finds what it missed.
    const ghost = new EventStream(this.bus, this.sessionId, stream.streamId, undefined);
    const timer = setTimeout(() => this.lapse(), DETACHED_GRACE_MS);
    timer.unref();
    this.detached = { stream: ghost, timer };
  }

  /**
   * Closes the connections but not the streams (the spec's polling behaviour; a drain): clients
   * reconnect with Last-Event-ID, to this node or another, and miss nothing buffered, as the
   * newest leaves a stand-in.
   */
  disconnect(): void {
    for (const s of [...this.streams]) s.sse?.end();
  }

  /**
   * The stand-in's grace ended without a resume: the channel ends, and says so to every node,
   * where a stream of the session that a later one silenced may take the notifications again
   * (get-streams.ts).
   */
  private lapse(): void {
    if (this.opening > 0) {
      // A GET of the session is being connected here: it keeps the channel, and becomes the
      // newest when its own announcement comes back. Only the stand-in goes.
      this.detached = undefined;
      return;
    }
    const event = { type: 'stream_lapsed', sessionId: this.sessionId, nodeId: this.bus.nodeId } as const;
    void this.bus.publishControl(event).catch(() => {});
    this.end();
  }

  /** The newest of this node's streams, while it is connected. */
  get newestStreamId(): string | undefined {
    return this.streams.at(-1)?.streamId;
  }

  /** A stream here is the session's newest again (its `stream_live` came back last). */
  newestHere(): void {
    this.elsewhere = false;
  }

  deliver(frame: string | Buffer): void {
    if (this.elsewhere) return;
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
