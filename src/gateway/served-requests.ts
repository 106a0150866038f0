// The owner side of a cross-node request: another node's client asked for a phone whose
// socket is on this node. The request runs on the local socket through the same
// DeviceConnection logic as a local call, and its answers go back to the origin node
// (router.ts), in order; the origin can cancel or orphan it meanwhile. The messages are
// node-messages.ts.
import { Buffer } from 'node:buffer';
import { relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import { BusUnavailableError } from '../bus/index.ts';
import { nodeHeaderLine, ridHead, type NodeHead } from '../bus/formats.ts';
import type { CallHandle, Caller, DeviceConnection, ReplySink } from './device-connection.ts';
import type { GatewayContext } from './context.ts';
import { crossNode } from '../metrics.ts';
import { contextWith, tracingOn } from '../observability/tracing.ts';
import { busServeSpan, endServe } from '../observability/relay-spans.ts';
import { forwardedBytes, ORIGIN_GRACE_MS, type Header, type ReqHeader } from './node-messages.ts';
import type { BufferPool } from './buffer-pool.ts';
import { answerPoolOf, takeAnswerBuffer } from './answer-buffers.ts';
import { withId } from '../protocol/frame.ts';
import { SlotTable, givenHashes, hashIntWith, hashString } from './slot-table.ts';
import { checkToolHeaders } from './tool-header-check.ts';
import type { JsonRpcId } from '../protocol/jsonrpc.ts';
import { parseJson } from '../protocol/exact-json.ts';

/** How often an owner retries an answer the bus could not take (it is reconnecting). */
const REPLY_RETRY_MS = 50;

const EMPTY = Buffer.alloc(0);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class ServedRequests {
  /**
   * Requests other nodes sent here, by `${from}:${rid}`, for cancellation: a table that does not
   * churn (docs/decisions/0236-tables-that-do-not-churn.md), always given `hashOf`'s hash.
   */
  private readonly served = new SlotTable<string, Served>(givenHashes, '');
  private lastOrigin: string | undefined = undefined;
  private lastOriginHash = 0;
  /** When another node last sent this node a request (drain waits for that traffic to stop). */
  lastServedAt = 0;

  /**
   * @param handedOver Devices this node handed over to other nodes (drain), kept by the
   *   Router: late requests for them are sent back to wait for the phone's next node.
   */
  constructor(
    private readonly ctx: GatewayContext,
    private readonly handedOver: ReadonlySet<string>,
  ) {}

  /** Runs a request for another node and sends the answer back to it. */
  async serve(h: ReqHeader, payload: Buffer): Promise<void> {
    const now = (this.lastServedAt = Date.now());
    crossNode.owner.inc();
    const consumer = tracingOn ? busServeSpan(h.tp, h.tst, h.method, h.from) : undefined;
    const sink = new Served(this, h, consumer, now);
    const conn = this.ctx.hub.device(h.deviceId);
    if (!conn || conn.closed || this.ctx.hub.isMoving(conn)) {
      // Handed over (drain): the origin waits for the phone's next node. Otherwise the origin
      // had a stale owner: it asks the bus again.
      consumer?.end();
      return sink.reply(
        nodeHeaderLine({
          t: 'redo',
          rid: h.rid,
          why: this.handedOver.has(h.deviceId) ? 'moving' : 'gone',
        } satisfies Header),
      );
    }
    // A stale owner never answers: the origin saw a newer claim than this socket's.
    if (conn.epoch !== undefined && h.epoch > conn.epoch)
      return sink.fail(relayError('device_offline', 'the phone reconnected elsewhere'));
    const caller: Caller = { scopes: h.scopes, tokenId: h.tokenId, trace: consumer && contextWith(consumer) };
    if (h.b) {
      const req = forwardedBytes(h, payload);
      if (!req) return sink.fail(relayError('relay_error', 'malformed forwarded request'));
      if (!conn.isReady && !(await this.untilReady(conn, sink))) return;
      // The caller context is in the params already (paramsWithCaller on the origin).
      const relayId = conn.handleClientBytes(req, EMPTY, caller, sink, h.timeoutMs);
      if (!sink.done && relayId !== 0) this.serving(sink, conn, relayId);
      else this.unserve(sink);
      return;
    }
    let params: Record<string, unknown> | undefined;
    try {
      params = payload.length ? (parseJson(payload.toString('utf8')) as Record<string, unknown>) : undefined;
    } catch {
      return sink.fail(relayError('relay_error', 'malformed forwarded request'));
    }
    if (!conn.isReady && !(await this.untilReady(conn, sink))) return;
    let timeoutMs = h.timeoutMs;
    if (h.ph) {
      // Tool headers the origin could not check: checked, and the call sized, here, as the
      // origin would have with the catalog (src/gateway/tool-header-check.ts).
      const v = checkToolHeaders(conn.tools, h.method, params, h.ph, timeoutMs, this.ctx.config.requestTimeoutMs);
      if ('error' in v) return sink.fail(v.error);
      timeoutMs = v.timeoutMs;
    }
    const cancel = conn.handleClientRequest(
      { jsonrpc: '2.0', id: h.id, method: h.method, params },
      params,
      caller,
      sink,
      timeoutMs,
    );
    // Answers from the cache settle synchronously: nothing left to cancel then.
    if (!sink.done) this.serving(sink, undefined, 0, cancel);
    else this.unserve(sink);
  }

  /** The origin's notifications/cancelled or its client gone (`cancel`). */
  cancel(from: string, rid: number): void {
    this.served.get(servedKey(from, rid), this.hashOf(from, rid))?.cancel();
  }

  /** The origin's client is gone for good (`orphan`). */
  orphan(from: string, rid: number): void {
    this.served.get(servedKey(from, rid), this.hashOf(from, rid))?.orphan();
  }

  /**
   * Node `from` said goodbye or died: nobody can take the answers of the requests it sent here,
   * so they stop counting against their keys, as a client gone for good does
   * (docs/decisions/0042-abandoned-calls.md, 0243).
   */
  originGone(from: string): void {
    for (const [, s] of this.served.entries()) if (s.from === from) s.orphan();
  }

  /**
   * Waits for the phone's initialize before request `s` starts. The request is in the table
   * meanwhile: a cancel or orphan read with it from the same message batch (handled before this
   * wait ends) is kept and applied, not lost. False when it must not start: the phone did not
   * initialize (`s` failed), or the origin cancelled it meanwhile.
   */
  private async untilReady(conn: DeviceConnection, s: Served): Promise<boolean> {
    this.served.set(s.key, s, s.keyHash);
    try {
      await conn.ready();
    } catch {
      s.fail(relayError('device_offline', 'the phone did not complete initialize'));
      return false;
    }
    if (!s.cancelledEarly) return true;
    // The origin has failed its client already and expects nothing more.
    s.drop();
    return false;
  }

  private serving(s: Served, conn: DeviceConnection | undefined, relayId: number, handle?: CallHandle): void {
    s.conn = conn;
    s.relayId = relayId;
    s.handle = handle;
    this.served.set(s.key, s, s.keyHash);
    if (s.orphanedEarly) s.orphan();
  }

  /**
   * @internal A served request's hash in the table, computed once per request: the origin's
   * hash (the last origin's is kept: a node's requests come from a few origins, in runs) and
   * its request id, not the key's characters.
   */
  hashOf(from: string, rid: number): number {
    if (from !== this.lastOrigin) {
      this.lastOrigin = from;
      this.lastOriginHash = hashString(from);
    }
    return hashIntWith(rid, this.lastOriginHash);
  }

  /** @internal Served: the request is answered, no longer cancellable. */
  unserve(s: Served): void {
    if (this.served.get(s.key, s.keyHash) === s) this.served.delete(s.key, s.keyHash);
  }

  /**
   * @internal Served's replies, in order; one that meets a bus still reconnecting is retried
   * until `until`. True when the first attempt went through (Redis has read it, and no other
   * attempt left a copy on a connection), false after a retry or when it was given up.
   */
  async replyTo(
    node: string,
    msg: NodeHead,
    until: number,
    payload: Buffer | undefined,
    last: boolean,
  ): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        // A request's last reply: nothing is decided on who heard it (the origin's own timer
        // and owner check cover a node that left), so the bus may skip Redis' answer to it.
        if (last) await this.ctx.bus.replyToNode(node, msg, payload);
        else await this.ctx.bus.sendToNode(node, msg, payload);
        return attempt === 0;
      } catch (err) {
        if (!(err instanceof BusUnavailableError) || Date.now() + REPLY_RETRY_MS >= until) return false;
        await sleep(REPLY_RETRY_MS);
      }
    }
  }
}

/**
 * One request another node sent here, from its start to its answer: the phone's sink, the
 * replies' order and the cancel handle in one object (no closure per role).
 */
class Served implements ReplySink {
  readonly key: string;
  readonly keyHash: number;
  done = false;
  conn?: DeviceConnection;
  relayId = 0;
  handle?: CallHandle;
  /** Answers go out in order: the previous reply, while it is still being sent. */
  private outbox?: Promise<unknown>;
  private readonly until: number;

  constructor(
    private readonly owner: ServedRequests,
    private readonly h: ReqHeader,
    private readonly consumer: ReturnType<typeof busServeSpan> | undefined,
    /** The clock (Date.now()) as the caller read it. */
    now: number,
  ) {
    this.key = servedKey(h.from, h.rid);
    this.keyHash = owner.hashOf(h.from, h.rid);
    this.until = now + h.timeoutMs + ORIGIN_GRACE_MS;
  }

  /** Cancelled or orphaned by the origin before it started (ServedRequests.untilReady). */
  cancelledEarly = false;
  orphanedEarly = false;

  /** The node that sent the request, where its answers go. */
  get from(): string {
    return this.h.from;
  }

  respond(frame: Buffer): void {
    this.answered(frame);
  }

  /**
   * The phone's answer (`view` valid during this call only), copied into a reused buffer. It
   * goes back once Redis has read it at the first attempt; a reply retried or given up may still
   * sit in a socket's queue, so its buffer is left to the collector
   * (docs/decisions/0235-pooled-answer-buffers.md).
   */
  respondAsReceived(view: Buffer, idStart: number, idEnd: number, clientId: JsonRpcId): void {
    const frame = withId(view, idStart, idEnd, clientId, takeAnswerBuffer);
    this.answered(frame, answerPoolOf(frame));
  }

  private answered(frame: Buffer, pool?: BufferPool): void {
    this.done = true;
    this.owner.unserve(this);
    this.reply(ridHead('res', this.h.rid), frame, true, pool);
    if (this.consumer) endServe(this.consumer);
  }

  related(frame: Buffer): void {
    this.reply(ridHead('rel', this.h.rid), frame, false);
  }

  fail(error: JsonRpcErrorObject): void {
    this.done = true;
    this.owner.unserve(this);
    this.reply(nodeHeaderLine({ t: 'fail', rid: this.h.rid, error } satisfies Header));
    if (this.consumer) endServe(this.consumer, error);
  }

  /** The origin's notifications/cancelled or its client gone (`cancel`). */
  cancel(): void {
    if (this.conn) this.conn.cancelCall(this.relayId);
    else if (this.handle) this.handle();
    else this.cancelledEarly = true;
  }

  orphan(): void {
    if (this.conn) this.conn.orphanCall(this.relayId);
    else if (this.handle) this.handle.orphan?.();
    else this.orphanedEarly = true;
  }

  /** Never started, and nothing sent back (the origin cancelled it). */
  drop(): void {
    this.done = true;
    this.owner.unserve(this);
    if (this.consumer) endServe(this.consumer, relayError('cancelled'));
  }

  /**
   * Sends a reply's header line `msg`; `last` unless more replies follow (`rel`). A `frame`
   * taken from `pool` goes back to it once sent.
   */
  reply(msg: NodeHead, frame?: Buffer, last = true, pool?: BufferPool): void {
    const prev = this.outbox;
    // The first reply (usually the only one) is sent at once; later ones wait for the one
    // before (answered by Redis, so delivered before it even on another connection).
    const sent = prev
      ? prev.then(() => this.owner.replyTo(this.h.from, msg, this.until, frame, last))
      : this.owner.replyTo(this.h.from, msg, this.until, frame, last);
    this.outbox = pool && frame ? sent.then((first) => first && pool.release(frame)) : sent;
  }
}

/** A served request's key: the origin node and its request id there. */
function servedKey(from: string, rid: number): string {
  return `${from}:${rid}`;
}
