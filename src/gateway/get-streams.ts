// GET /mcp on the session revisions: the session's standalone stream (one SessionChannel per
// session on this node, shared by its GETs), and the resumption of a POST stream a client lost
// (Last-Event-ID of a POST stream), followed through the replay buffer on any node.
import { randomBytes } from 'node:crypto';
import type { Exchange } from './http.ts';
import type { GatewayContext } from './context.ts';
import type { ControlEvent, SessionRecord } from '../bus/types.ts';
import type { McpHeaders } from './mcp-headers.ts';
import { SseStream } from './sse.ts';
import { EventStream, isResponseEvent, newStreamId, postStreamDeadline, SessionChannel } from './session-streams.ts';
import { parseEventId } from '../bus/index.ts';
import { errorResponse } from '../protocol/jsonrpc.ts';
import { relayError } from '../protocol/errors.ts';
import { MAX_TIMEOUT_MS } from '../protocol/timeouts.ts';
import { JSON_HEADERS } from './mcp-stateless.ts';
import { sseReplays } from '../metrics.ts';

/** A resumed POST stream looks for its next events this often (the replay buffer is shared by all nodes). */
const FOLLOW_POLL_MS = 200;
/** Beyond a request's deadline: the origin's grace before it gives up, plus the buffer write. */
const FOLLOW_GRACE_MS = 5_000;
/**
 * How long a GET waits for its `stream_live` announcement to come back before it attaches
 * anyway (the bus slow or reconnecting): normally one round trip.
 */
const ANNOUNCE_WAIT_MS = 1_000;
/**
 * How long a resume waits for another node to answer that its stand-in for the session is in
 * the replay buffer (`stream_released`), when this node had none: normally a round trip or
 * two; the whole wait only when no node has one (it lapsed, or its node died).
 */
const HANDOVER_WAIT_MS = 500;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class GetStreams {
  /** Sessions with SSE streams on this node. */
  private readonly channels = new Map<string, SessionChannel>();

  /** This node's `stream_live` announcements on their way, by ref: each attaches its stream. */
  private readonly announced = new Map<string, () => void>();
  /** Resumes here waiting for another node's stand-in to be in the replay buffer, by ref. */
  private readonly released = new Map<string, () => void>();

  constructor(private readonly ctx: GatewayContext) {
    ctx.bus.onControl((e) => this.onControl(e));
  }

  /** Ends the session's standalone stream on this node (the session was deleted). */
  endChannel(sessionId: string): void {
    this.channels.get(sessionId)?.end();
  }

  /** A GET stream: joins (or creates) the session's channel; Last-Event-ID resumes a stream. */
  async open(ex: Exchange, h: McpHeaders, session: SessionRecord): Promise<void> {
    const lastEventId = h['last-event-id'];
    const postDeadline = lastEventId ? postStreamDeadline(parseEventId(lastEventId)?.streamId ?? '') : undefined;
    if (postDeadline !== undefined) return this.resumePost(ex, session, lastEventId, postDeadline);
    let channel = this.channels.get(session.id);
    if (!channel || channel.closed) {
      const created = new SessionChannel(
        this.ctx.bus,
        session.id,
        () => {
          if (this.channels.get(session.id) === created) this.channels.delete(session.id);
        },
        { tokenId: session.tokenId, accountId: session.accountId },
        this.ctx.config.budgets.maxStreamsPerSession,
      );
      this.channels.set(session.id, created);
      channel = created;
      created.opening++;
      try {
        await created.join(this.ctx.hub, session.deviceId);
      } catch {
        created.end();
        return ex.send(
          503,
          { ...JSON_HEADERS, 'Retry-After': '1' },
          errorResponse(null, relayError('relay_unavailable')),
        );
      } finally {
        created.opening--;
      }
    }
    // The client left while the channel was joining: a channel nobody listens on must not stay.
    if (ex.aborted) {
      if (channel.idle) channel.end();
      return;
    }
    // Last-Event-ID resumes that stream: what it missed is replayed, then it continues.
    const resume = h['last-event-id'] ? parseEventId(h['last-event-id']) : undefined;
    const stream = new EventStream(
      this.ctx.bus,
      session.id,
      resume?.streamId ?? newStreamId(),
      // Shown open once attached: a client that sees the 200 and then makes the phone notify
      // receives it (it went to nobody while the attachment was on its way).
      new SseStream(ex, { 'Mcp-Session-Id': session.id }, undefined, false),
    );
    const sse = stream.sse!;
    sse.onClose(this.ctx.hub.admitStream(session.tokenId, this.ctx.config.budgets.maxStreamsPerKey, sse));
    channel.opening++;
    let connected = false;
    try {
      if (resume) {
        sseReplays.get.inc();
        // Attached before the replay is read, so nothing delivered meanwhile is missed: held
        // until the replay is written, then written after it (docs/decisions/0246-get-stream-handover.md).
        stream.holdForReplay();
      }
      // Revoked while this GET was on its way (authenticated from the cache just before).
      if (!this.ctx.hub.isRevoked(session)) {
        await this.connect(channel, stream, resume !== undefined);
        connected = true;
        // The priming event follows the attachment: an event the phone sent meanwhile may come
        // before it, with an id of its own to resume from.
        if (!resume && session.revision === '2025-11-25') void stream.prime();
        sse.open();
      }
    } finally {
      channel.opening--;
    }
    if (!connected) {
      void stream.end();
      if (channel.idle) channel.end();
      return;
    }
    if (!resume) return;
    const missed = await this.ctx.bus.replayAfter(session.id, h['last-event-id']).catch(() => undefined);
    // Unread, the missed events would be skipped for good: the client's Last-Event-ID moves past
    // them with the first live one. Ended, the stream is resumed again from where it was.
    if (missed) stream.release(missed);
    else void stream.end();
  }

  /**
   * Announces the stream to every node (a `stream_live` control event) and attaches it to the
   * channel when the announcement comes back to this node, in the handler: the device's
   * notifications this node hears after it are the stream's, those before went to whoever had
   * the session's stream until then (a stand-in, here or on another node, which each node drops
   * on the announcement). With the bus down, or the announcement late, it attaches anyway.
   *
   * A resuming stream's connect resolves once what the stand-in collected is in the replay
   * buffer, so the replay read after it has everything: at once when the stand-in was here, on
   * the other node's `stream_released` when it was there, after HANDOVER_WAIT_MS when none
   * answers (no stand-in left anywhere), and without a wait on a node with no live peer. docs/decisions/0246-get-stream-handover.md.
   */
  private connect(channel: SessionChannel, stream: EventStream, resuming: boolean): Promise<void> {
    const ref = randomBytes(6).toString('base64url');
    let released: Promise<void> | undefined;
    let stopWaiting = () => {};
    // Only another node can hold the stand-in, and answer that it is in the buffer.
    if (resuming && this.ctx.bus.othersAlive()) {
      released = new Promise<void>((resolve) => {
        const done = () => {
          if (!this.released.delete(ref)) return;
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(done, HANDOVER_WAIT_MS);
        this.released.set(ref, done);
        stopWaiting = done;
      });
    }
    return new Promise<void>((resolve) =>
      this.announce(channel.sessionId, stream.streamId, ref, (sent) => {
        if (!sent) stopWaiting(); // nobody hears this node: no answer will come
        const here = channel.attach(stream);
        if (here) stopWaiting(); // the stand-in was this node's
        resolve(here ?? released);
      }),
    );
  }

  /**
   * Publishes `stream_live`; `back` runs once, in the handler of its own copy coming back (or
   * when it could not be sent, or after ANNOUNCE_WAIT_MS).
   */
  private announce(sessionId: string, streamId: string, ref: string, back: (sent: boolean) => void): void {
    const once = (sent: boolean) => {
      if (!this.announced.delete(ref)) return;
      clearTimeout(timer);
      back(sent);
    };
    const timer = setTimeout(() => once(true), ANNOUNCE_WAIT_MS);
    this.announced.set(ref, () => once(true));
    this.ctx.bus
      .publishControl({ type: 'stream_live', sessionId, streamId, nodeId: this.ctx.bus.nodeId, ref })
      .catch(() => once(false));
  }

  /**
   * `stream_live`: this node's own announcement coming back (attach), or another node's stream
   * (drop what this node buffers for the session, and say when that is in the replay buffer).
   * `stream_released`: the answer a resume here waits for. `stream_lapsed`: the session's
   * newest stream is gone; a stream of it here that was silenced by that one announces itself
   * anew, and takes the notifications when its announcement comes back (if several nodes do,
   * the last announcement wins, as everywhere).
   */
  private onControl(e: ControlEvent): void {
    if (e.type === 'stream_released') {
      if (e.nodeId !== this.ctx.bus.nodeId) this.released.get(e.ref)?.();
      return;
    }
    if (e.type === 'stream_lapsed') {
      const channel = this.channels.get(e.sessionId);
      const streamId = channel?.newestStreamId;
      if (e.nodeId === this.ctx.bus.nodeId || !channel?.elsewhere || streamId === undefined) return;
      this.announce(e.sessionId, streamId, randomBytes(6).toString('base64url'), () => channel.newestHere());
      return;
    }
    if (e.type !== 'stream_live') return;
    if (e.nodeId === this.ctx.bus.nodeId) {
      this.announced.get(e.ref)?.();
      return;
    }
    const dropped = this.channels.get(e.sessionId)?.liveElsewhere(e.streamId);
    if (!dropped) return;
    const answer = {
      type: 'stream_released',
      sessionId: e.sessionId,
      nodeId: this.ctx.bus.nodeId,
      ref: e.ref,
    } as const;
    void dropped.then(() => this.ctx.bus.publishControl(answer)).catch(() => {});
  }

  /**
   * GET with the Last-Event-ID of a POST stream (the client lost it, or was cut off by a
   * proxy): what that stream carried since, then its answer — followed through the replay
   * buffer, so it works on any node while the call is still running — then the stream ends.
   */
  private async resumePost(ex: Exchange, session: SessionRecord, lastEventId: string, deadline: number): Promise<void> {
    sseReplays.post.inc();
    const sse = new SseStream(ex, { 'Mcp-Session-Id': session.id });
    const release = this.ctx.hub.hold({
      deviceId: session.deviceId,
      tokenId: session.tokenId,
      accountId: session.accountId,
      sessionId: session.id,
      end: () => sse.end(),
    });
    sse.onClose(release);
    // Past the request's deadline its answer (a timeout error at worst) is buffered, or gone.
    const until = Math.min(deadline, Date.now() + MAX_TIMEOUT_MS) + FOLLOW_GRACE_MS;
    const { streamId, seq: seen } = parseEventId(lastEventId)!;
    // The first read takes the whole stream: a client holding one of its ids means it has at
    // least one event, so none at all is a stream that never was (or expired): nothing to follow.
    let last = `${streamId}:0`;
    for (let first = true; !sse.closed; first = false) {
      const events = await this.ctx.bus.replayAfter(session.id, last).catch(() => undefined);
      if (events === undefined) break; // the bus is away: end the stream, the client retries
      if (first && events.length === 0) break;
      for (const e of events) {
        last = e.id;
        if (!e.data || parseEventId(e.id)!.seq <= seen) continue;
        sse.send(e.data, e.id);
        if (isResponseEvent(e.data)) return sse.end();
      }
      if (Date.now() >= until) break;
      await sleep(FOLLOW_POLL_MS);
    }
    sse.end();
  }
}
