// GET /mcp on the session revisions: the session's standalone stream (one SessionChannel per
// session on this node, shared by its GETs), and the resumption of a POST stream a client lost
// (Last-Event-ID of a POST stream), followed through the replay buffer on any node.
import type { Exchange } from './http.ts';
import type { GatewayContext } from './context.ts';
import type { SessionRecord } from '../bus/types.ts';
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
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class GetStreams {
  /** Sessions with SSE streams on this node. */
  private readonly channels = new Map<string, SessionChannel>();

  constructor(private readonly ctx: GatewayContext) {}

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
      new SseStream(ex, { 'Mcp-Session-Id': session.id }),
    );
    const sse = stream.sse!;
    sse.onClose(this.ctx.hub.admitStream(session.tokenId, this.ctx.config.budgets.maxStreamsPerKey, sse));
    channel.opening++;
    try {
      if (resume) {
        sseReplays.get.inc();
        const missed = await this.ctx.bus.replayAfter(session.id, h['last-event-id']).catch(() => []);
        for (const e of missed) if (e.data) stream.sse!.send(e.data, e.id);
      } else if (session.revision === '2025-11-25') {
        await stream.prime();
      }
    } finally {
      channel.opening--;
    }
    // Revoked while this GET was on its way (authenticated from the cache just before).
    if (this.ctx.hub.isRevoked(session)) {
      void stream.end();
      if (channel.idle) channel.end();
      return;
    }
    channel.attach(stream);
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
