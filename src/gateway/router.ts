// Getting a client request to the phone wherever its socket is: on this node (hub), or on
// the node that owns it (bus). The owner node runs the same DeviceConnection logic either
// way (served-requests.ts); the origin only relays the answer back to its HTTP exchange.
// What the nodes say to each other is node-messages.ts; one request's state on the origin is
// route.ts, the requests it has out at other nodes (and what becomes of them when a node
// leaves or dies) remote-requests.ts, and what it remembers of other nodes (owners, goodbyes)
// peer-directory.ts.
//
// Phones move between nodes: a draining node (SIGTERM) stops starting new work on its
// sockets, lets what is in flight finish, then closes each socket with 1012 after marking the
// device as moving in the bus (`moving:<id>`, MOVE_GRACE_MS). Until the phone has reconnected
// elsewhere, origin nodes hold new requests for it instead of failing them with
// device_offline: a request that reaches the draining owner is sent back (`redo`), and a
// request that finds no owner while the moving mark lives is held. A request that has seen the
// phone moving waits for it until its own deadline, however long the phone takes to come back
// (docs/decisions/0209-a-moving-phone-is-waited-for-until-the-deadline.md). See docs/OPERATIONS.md.
import { performance } from 'node:perf_hooks';
import { relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import { offlineRefusal } from '../protocol/scopes.ts';
import type { JsonRpcId, JsonRpcRequest } from '../protocol/jsonrpc.ts';
import { BusTimeoutError, BusUnavailableError, type Bus, type DeviceOwner } from '../bus/index.ts';
import { decodeNodeMessage, reqHeaderLine, ridHead, UnreadableFormatError } from '../bus/formats.ts';
import type { Scope } from '../store/types.ts';
import type { CallHandle, Caller, DeviceConnection, ReplySink } from './device-connection.ts';
import { paramsWithCaller, type ClientRequestBytes } from '../protocol/request-bytes.ts';
import type { GatewayContext } from './context.ts';
import { matchesCredential, type CredentialMatch, type RevocationReason } from './hub.ts';
import { answered, crossNode, goodbyes, reroutes, unreadable } from '../metrics.ts';
import { tracingOn } from '../observability/tracing.ts';
import { busSendSpan } from '../observability/relay-spans.ts';
import { encode, farewellMessage, ORIGIN_GRACE_MS, type Header, type ReqHeader } from './node-messages.ts';
import { ServedRequests } from './served-requests.ts';
import { Route, type LocalRoute, type RemotePending } from './route.ts';
import { PeerDirectory } from './peer-directory.ts';
import { RemoteRequests } from './remote-requests.ts';
import { byFirst, idTable } from './slot-table.ts';
import { RequestIds } from './request-ids.ts';
import { checkToolHeaders } from './tool-header-check.ts';
import { parseJson, stringifyJson } from '../protocol/exact-json.ts';

/**
 * How long a phone closed with 1012 counts as moving for requests that arrive meanwhile: its
 * reconnect (≤ 1 s jitter) plus handshake. A request that saw the mark keeps waiting past it,
 * until its own deadline (Route.moving).
 */
export const MOVE_GRACE_MS = 5_000;
/**
 * After this node's bus comes back, how long a phone with no live owner counts as possibly
 * being reclaimed by a node that lost Redis too (its liveness lapsed meanwhile): requests for it
 * wait this long (within their deadline) before device_offline. Peers reconnect within a
 * second (ioredis backoff ≤ 1 s), then resubscribe, renew and reclaim each phone
 * (docs/decisions/0210-no-phone-offline-because-redis-was-down.md).
 */
export const RECLAIM_GRACE_MS = 5_000;
/** How often a held request looks for the phone's new owner. */
const MOVE_POLL_MS = 50;
/** Re-routes after an owner said the phone is not there, before giving up with device_offline. */
const MAX_GONE = 2;
/**
 * How long a request for a phone that is not connected waits for the phone's cached
 * capabilities (the store) before it is answered device_offline without them: a store read
 * takes milliseconds, a stalled store must not hold the answer (docs/decisions/0206-store-stall-is-down.md).
 */
const OFFLINE_LOOKUP_MS = 500;

export const movingKey = (deviceId: string) => `moving:${deviceId}`;
/**
 * Set beside movingKey by the node the phone moves away from: requests that node held are known
 * never to have started there only if that very node marked the phone (RemoteRequests).
 */
export const movedFromKey = (deviceId: string, nodeId: string) => `moved:${deviceId}:${nodeId}`;

/** The marks a node leaving a phone sets (Router.markMoving): moving, and moved from this node. */
export async function markHandedOver(bus: Pick<Bus, 'mark' | 'nodeId'>, deviceId: string): Promise<void> {
  await Promise.all([
    bus.mark(movingKey(deviceId), MOVE_GRACE_MS).catch(() => {}),
    bus.mark(movedFromKey(deviceId, bus.nodeId), MOVE_GRACE_MS).catch(() => {}),
  ]);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The bus counter that numbers a node id's blocks of request ids (request-ids.ts). */
export const ridBlockKey = (nodeId: string) => `rids:${nodeId}`;
/** How long that counter lives without a new block: far longer than any call. */
const RID_BLOCKS_WINDOW_MS = 30 * 24 * 3600_000;

export class Router {
  /** This process's ids for its requests to other nodes, none a predecessor's. */
  private readonly rids: RequestIds;
  /** Requests this node accepted from its clients and has not answered yet. */
  private readonly active = idTable<Route>();
  /** Origin side: requests this node sent to an owner node. */
  private readonly remote: RemoteRequests;
  /** Devices this node handed over to other nodes (drain): late requests for them are sent back. */
  private readonly handedOver = new Set<string>();
  /** Owner side: requests other nodes sent here. */
  private readonly served: ServedRequests;
  private readonly clientCancel: Array<(sessionId: string, requestId: JsonRpcId) => void> = [];
  /** Origin side: owners of phones held elsewhere, and nodes that said goodbye, for a while. */
  private readonly peers: PeerDirectory;
  /** Until then, a phone with no owner may be one a peer is reclaiming after a Redis outage (RECLAIM_GRACE_MS). */
  private reclaimUntil = 0;

  constructor(private readonly ctx: GatewayContext) {
    this.rids = new RequestIds(() => ctx.bus.hit(ridBlockKey(ctx.bus.nodeId), RID_BLOCKS_WINDOW_MS));
    this.served = new ServedRequests(ctx, this.handedOver);
    this.peers = new PeerDirectory(ctx.bus);
    this.remote = new RemoteRequests(ctx, this.peers, {
      timedOut: (rid, r) => this.timedOut(rid, r),
      routeAgain: (r) => this.routeAgain(r),
      movedFrom: async (deviceId, node) => (await ctx.bus.peek(movedFromKey(deviceId, node))) > 0,
    });
    const bus = ctx.bus;
    bus.onNodeBytes((b, start, end) => this.onMessage(b, start, end));
    bus.onNodeDown((node) => {
      this.peers.forgetNode(node);
      this.served.originGone(node);
      void this.remote.nodeGone(node, 'down');
    });
    bus.onUnavailable(() => {
      this.peers.forgetOwners();
      this.remote.failAll(relayError('relay_unavailable'));
    });
    bus.onReconnected(() => {
      this.peers.forgetOwners();
      // Peers lost Redis too, and may not have renewed and reclaimed their phones yet.
      this.reclaimUntil = Date.now() + RECLAIM_GRACE_MS;
    });
    ctx.hub.onRevoke((match, reason) => this.cancelWhere(match, reason));
  }

  /**
   * Cancels every request this node accepted for a credential (or device, or account) that was
   * revoked: the phone is told (notifications/cancelled), the client gets `cancelled`, or
   * `device_removed` when the phone was removed (whichever node learns of it first answers alike).
   */
  cancelWhere(match: CredentialMatch, reason: RevocationReason = 'revoked'): number {
    const error = reason === 'device_removed' ? relayError('device_removed') : relayError('cancelled');
    let n = 0;
    for (const [, r] of this.active.entries().sort(byFirst)) {
      const who = { deviceId: r.deviceId, tokenId: r.caller.tokenId, accountId: r.caller.accountId };
      if (match.sessionId === undefined && matchesCredential(match, who)) {
        this.cancel(r, error);
        n++;
      }
    }
    return n;
  }

  /** Client requests this node is still answering (local or remote, held or sent). */
  get inFlight(): number {
    return this.active.size;
  }

  /** When another node last sent this node a request (drain waits for that traffic to stop). */
  get lastServedAt(): number {
    return this.served.lastServedAt;
  }

  /**
   * Drain deadline: every request this node's clients still wait for gets its error answer
   * now, while this node can still write it; otherwise it would wait out its own deadline past
   * the node's exit and its client would see the connection close with no answer
   * (docs/OPERATIONS.md, "Node lifecycle and failures"). A request still held for a phone that
   * has not come back (state `routing`) fails with device_offline; one sent to the phone's node
   * (`remote`) is cancelled there, as a revoked one is (`cancel`), and fails with
   * relay_unavailable; one on a phone of this node (`local`: its socket is closed by now, so
   * there should be none) is cancelled at the phone.
   */
  failHeld(): number {
    let n = 0;
    for (const [, r] of this.active.entries().sort(byFirst)) {
      if (r.done) continue;
      if (r.state === 'routing')
        r.sink.fail(relayError('device_offline', 'the phone did not come back before this relay node stopped'));
      else
        this.cancel(
          r,
          relayError('relay_unavailable', 'this relay node stopped before the answer came; the call was cancelled'),
        );
      n++;
    }
    return n;
  }

  close(): void {
    this.remote.close();
    this.peers.close();
  }

  /**
   * Last words of a node stopping on purpose, after everything it started has been answered:
   * requests that reach it from now on are never run, so their origins route them again.
   * Sent the way the answers go (replyToNode: on the Redis bus, the connection that carries
   * them, docs/decisions/0142-quiet-answers.md), so it arrives after all of them.
   */
  async farewell(): Promise<void> {
    const nodes = await this.ctx.bus.aliveNodes().catch(() => [] as string[]);
    const msg = farewellMessage(this.ctx.bus.nodeId);
    goodbyes.sent.inc();
    await Promise.all(
      nodes.filter((n) => n !== this.ctx.bus.nodeId).map((n) => this.ctx.bus.replyToNode(n, msg).catch(() => {})),
    );
  }

  /**
   * Sends one client request towards the phone. The sink gets exactly one of respond/fail;
   * the returned function cancels (client gone, or its notifications/cancelled).
   */
  // eslint-disable-next-line @typescript-eslint/require-await -- callers await it: a throw while routing must reach them as a rejection
  async request(
    deviceId: string,
    msg: JsonRpcRequest,
    params: Record<string, unknown> | undefined,
    caller: Caller,
    sink: ReplySink,
    timeoutMs: number,
  ): Promise<CallHandle> {
    const r = new Route(this.active, deviceId, msg, params, caller, sink, timeoutMs);
    void this.route(r); // never throws; may wait while the phone moves, so cancel works meanwhile
    return Object.assign(() => this.cancel(r), { orphan: () => this.orphan(r) });
  }

  /**
   * The phone's socket on this node when a request can start on it at once: connected, past
   * its initialize and catalog, and not handed over (see startLocal).
   */
  readyLocal(deviceId: string): DeviceConnection | undefined {
    const local = this.usableLocal(deviceId);
    return local?.isReady ? local : undefined;
  }

  /**
   * `request` for a phone `readyLocal` returned, in bytes (src/protocol/request-bytes.ts) and
   * without a wait: the frame is queued before this returns, and nothing per call but the
   * route itself is created. Cancel or orphan it with cancelRoute / orphanRoute.
   */
  startLocal(
    conn: DeviceConnection,
    req: ClientRequestBytes,
    callerJson: Buffer,
    caller: Caller,
    sink: ReplySink,
    timeoutMs: number,
    now = Date.now(),
  ): LocalRoute {
    const r = this.bytesRoute(conn.deviceId, req, caller, sink, timeoutMs, now);
    r.state = 'local';
    r.conn = conn;
    r.relayId = conn.handleClientBytes(req, callerJson, caller, r, timeoutMs);
    return r;
  }

  /**
   * The owner to send a request to at once: the phone is not on this node, its owner on
   * another node is remembered (peer-directory.ts), and the bus is whole. Undefined otherwise
   * (the general path decides: `request`).
   */
  knownRemoteOwner(deviceId: string, now = Date.now()): DeviceOwner | undefined {
    if (!this.ctx.bus.available || this.ctx.hub.device(deviceId)) return undefined;
    return this.peers.cachedOwner(deviceId, now);
  }

  /**
   * `request` for a request held as bytes, to the owner `knownRemoteOwner` returned: the
   * client's body crosses the bus as it is, with the offsets the origin read, and the owner
   * builds the phone's frame from it as startLocal does (docs/decisions/0134-cross-node-bytes.md).
   * Cancel or orphan it with cancelRoute / orphanRoute.
   */
  startRemote(
    deviceId: string,
    owner: DeviceOwner,
    req: ClientRequestBytes,
    callerJson: Buffer,
    caller: Caller,
    sink: ReplySink,
    timeoutMs: number,
    now = Date.now(),
  ): LocalRoute {
    const r = this.bytesRoute(deviceId, req, caller, sink, timeoutMs, now);
    r.bytes = req;
    r.callerJson = callerJson;
    void this.send(r, owner, true, now);
    return r;
  }

  /** The route of a request held as bytes: only its id and method are kept as a message. */
  private bytesRoute(
    deviceId: string,
    req: ClientRequestBytes,
    caller: Caller,
    sink: ReplySink,
    timeoutMs: number,
    now: number,
  ) {
    return new Route(
      this.active,
      deviceId,
      { jsonrpc: '2.0', id: req.id, method: req.method },
      undefined,
      caller,
      sink,
      timeoutMs,
      now,
    );
  }

  cancelRoute(r: LocalRoute): void {
    this.cancel(r);
  }

  orphanRoute(r: LocalRoute): void {
    this.orphan(r);
  }

  /** The request's client is gone for good: wherever it runs, it stops counting against its key. */
  private orphan(r: Route): void {
    if (r.done || r.orphaned) return;
    r.orphaned = true;
    if (r.state === 'local') {
      if (r.conn) r.conn.orphanCall(r.relayId);
      else r.cancelLocal?.orphan?.();
    } else if (r.state === 'remote' && r.rid !== undefined) this.sendOrphan(r);
    // Still routing: route() and send() pass it on once the request runs.
  }

  private sendOrphan(r: Route): void {
    const p = r.rid === undefined ? undefined : this.remote.get(r.rid);
    if (p) this.followUp(p, encode({ t: 'orphan', from: this.ctx.bus.nodeId, rid: r.rid! }));
  }

  /** A message about a request already sent to `p.node`: after the request, never before it. */
  private followUp(p: RemotePending, msg: string): void {
    void p.sent.then(() => this.ctx.bus.replyToNode(p.node, msg).catch(() => {}));
  }

  /** A client notification for the phone (not answered). */
  async notify(deviceId: string, method: string, params: Record<string, unknown> | undefined): Promise<void> {
    const local = this.ctx.hub.device(deviceId);
    if (local && !local.closed) return local.notify(method, params);
    // The owner a request would use without asking (knownRemoteOwner), so that a request the
    // client sends once this notification is acknowledged cannot overtake it on the bus.
    const owner = this.knownRemoteOwner(deviceId) ?? (await this.ctx.bus.ownerOf(deviceId).catch(() => undefined));
    if (owner && owner.nodeId !== this.ctx.bus.nodeId) {
      await this.ctx.bus
        .sendToNode(
          owner.nodeId,
          encode({ t: 'note', deviceId, method }, params === undefined ? '' : stringifyJson(params)),
        )
        .catch(() => {});
    }
  }

  /**
   * A client's notifications/cancelled reached a node that is not answering that request
   * (no sticky sessions: the client's POSTs land anywhere). Every other node is asked to
   * cancel it if it is the one answering; see onClientCancel.
   */
  async broadcastCancel(sessionId: string, requestId: JsonRpcId): Promise<void> {
    const nodes = await this.ctx.bus.aliveNodes().catch(() => [] as string[]);
    const msg = encode({ t: 'ccancel', sessionId, requestId });
    await Promise.all(
      nodes.filter((n) => n !== this.ctx.bus.nodeId).map((n) => this.ctx.bus.sendToNode(n, msg).catch(() => false)),
    );
  }

  /** Another node relays a client's notifications/cancelled (the /mcp endpoint cancels its request, if it has it). */
  onClientCancel(handler: (sessionId: string, requestId: JsonRpcId) => void): void {
    this.clientCancel.push(handler);
  }

  // --- moving phones (drain) ----------------------------------------------------------------

  /** Drain: no new work starts on this socket; requests for the phone wait for its next node. */
  handOver(conn: DeviceConnection): void {
    this.ctx.hub.markMoving(conn);
    this.handedOver.add(conn.deviceId);
  }

  /**
   * Marks the device as moving in the bus; call right before closing its socket with 1012. A
   * mark left by an earlier move (the phone moved here less than MOVE_GRACE_MS ago) is renewed,
   * not kept to its first end.
   */
  async markMoving(deviceId: string): Promise<void> {
    this.handedOver.add(deviceId);
    await markHandedOver(this.ctx.bus, deviceId);
  }

  /** True while the phone is between nodes: held requests keep waiting for it. */
  private async isMoving(deviceId: string): Promise<boolean> {
    const local = this.ctx.hub.device(deviceId);
    if (local && !local.closed && this.ctx.hub.isMoving(local)) return true;
    return (await this.ctx.bus.peek(movingKey(deviceId))) > 0;
  }

  /** The local socket if new work may start on it. */
  private usableLocal(deviceId: string): DeviceConnection | undefined {
    const local = this.ctx.hub.device(deviceId);
    return local && !local.closed && !this.ctx.hub.isMoving(local) ? local : undefined;
  }

  // --- origin side --------------------------------------------------------------------------

  /** Finds the phone and starts the request there; waits while the phone is moving. */
  private async route(r: Route): Promise<void> {
    try {
      for (;;) {
        if (r.done) return;
        const local = this.usableLocal(r.deviceId);
        if (local) {
          try {
            await local.ready();
          } catch {
            // A socket that replaced this one during its handshake may serve the request.
            if (!r.done && this.usableLocal(r.deviceId) !== local) continue;
            return void r.sink.fail(relayError('device_offline', 'the phone did not complete initialize'));
          }
          if (r.done) return;
          if (this.usableLocal(r.deviceId) !== local) continue;
          r.state = 'local';
          if (r.bytes) {
            r.conn = local;
            r.relayId = local.handleClientBytes(r.bytes, r.callerJson!, r.caller, r.sink, this.remaining(r));
            if (r.orphaned) local.orphanCall(r.relayId);
            return;
          }
          let timeoutMs = this.remaining(r);
          if (r.caller.toolHeaders) {
            // Tool headers the endpoint could not check without the catalog, which is here now.
            const v = checkToolHeaders(
              local.tools,
              r.msg.method,
              r.params,
              r.caller.toolHeaders,
              timeoutMs,
              this.ctx.config.requestTimeoutMs,
            );
            if ('error' in v) return void r.sink.fail(v.error);
            timeoutMs = v.timeoutMs;
          }
          r.cancelLocal = local.handleClientRequest(r.msg, r.params, r.caller, r.sink, timeoutMs);
          if (r.orphaned) r.cancelLocal.orphan?.();
          return;
        }
        // Another node's answer comes back over this node's subscription: while the bus is
        // reconnecting (commands back, subscription not yet) it could be published to no one
        // and the request would wait out its timeout, so fail it at once.
        if (!this.ctx.bus.available) return void r.sink.fail(relayError('relay_unavailable'));
        const cached = r.fresh ? undefined : this.peers.cachedOwner(r.deviceId);
        const owner = cached ?? (await this.peers.lookupOwner(r.deviceId));
        r.fresh = false;
        if (r.done) return;
        if (owner && owner.nodeId !== this.ctx.bus.nodeId) return await this.send(r, owner, cached !== undefined);
        // No node to send it to. Wait only if the phone is known to be moving (then until the
        // deadline), or may be reclaimed by a peer that lost Redis as this node did.
        if (Date.now() + MOVE_POLL_MS < r.deadline) {
          if (!r.moving && (await this.isMoving(r.deviceId))) r.moving = true;
          if (r.moving || Date.now() < this.reclaimUntil) {
            await sleep(MOVE_POLL_MS);
            continue;
          }
        }
        return await this.failOffline(
          r,
          r.moving ? 'the phone did not come back from its move within the request deadline' : undefined,
        );
      }
    } catch (err) {
      r.sink.fail(relayError(err instanceof BusUnavailableError ? 'relay_unavailable' : 'relay_error'));
    }
  }

  /**
   * No phone to start the request on: what its socket would refuse (a method it did not
   * advertise, a scope the key lacks) is refused the same way, from the capabilities of its last
   * initialize result that the store keeps; the rest is device_offline
   * (docs/decisions/0217-offline-refusals-from-cached-capabilities.md).
   */
  private async failOffline(r: Route, detail?: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const initResult = await Promise.race([
      this.ctx.store.getDevice(r.deviceId).then(
        (d) => d?.initResult,
        () => undefined,
      ),
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), OFFLINE_LOOKUP_MS))),
    ]);
    clearTimeout(timer);
    r.sink.fail(offlineRefusal(r.msg.method, initResult, r.caller.scopes) ?? relayError('device_offline', detail));
  }

  private remaining(r: Route, now = Date.now()): number {
    return Math.max(1, r.deadline - now);
  }

  /** `now`: the clock as the caller read it (Date.now()), when the request starts here. */
  private async send(r: Route, owner: DeviceOwner, cached: boolean, now?: number): Promise<void> {
    let rid = this.rids.take();
    if (rid === 0) {
      // A new block of ids (once a million requests, or the first one): cancel works meanwhile.
      await this.rids.more();
      now = undefined; // the caller's clock is only good without a wait
      if (r.done) return;
      rid = this.rids.take();
      if (rid === 0) return void r.sink.fail(relayError('relay_unavailable'));
    }
    // Found at an owner: the move (if any) is over; a later one marks the request again.
    const wasMoving = r.moving;
    r.moving = false;
    now ??= Date.now();
    const timeoutMs = this.remaining(r, now);
    r.state = 'remote';
    r.rid = rid;
    r.sentPerf = performance.now();
    const b = r.bytes;
    if (b) r.payloadBytes ??= paramsWithCaller(b, r.callerJson!);
    else r.payload ??= r.params === undefined ? '' : stringifyJson(r.params);
    const producer = tracingOn ? busSendSpan(r.caller.trace, r.msg.method, owner.nodeId) : undefined;
    // Members in src/bus/req-header.ts's order: what changes per request, then the context.
    const header: ReqHeader = {
      t: 'req',
      rid,
      id: r.msg.id,
      timeoutMs,
      from: this.ctx.bus.nodeId,
      deviceId: r.deviceId,
      epoch: owner.epoch,
      method: r.msg.method,
      scopes: r.caller.scopes as Scope[], // serialised at once: no copy
      tokenId: r.caller.tokenId,
      tp: producer?.tp,
    };
    if (producer?.tst !== undefined) header.tst = producer.tst;
    if (b) {
      header.b = 1;
      if (b.toolName !== undefined) header.tn = b.toolName;
      if (b.timeoutS !== undefined) header.ts = b.timeoutS;
    } else if (r.caller.toolHeaders) header.ph = r.caller.toolHeaders; // checked by the owner (served-requests.ts)
    crossNode.origin.inc();
    // A publish Redis answered late may have reached the owner (BusTimeoutError): it stays
    // pending, settled by the owner's answer, the owner check, the bus going down or its timer.
    // Heard by nobody: false now, or (sent without Redis' reply) an `unheard` back later.
    const sent = this.ctx.bus
      .sendOrBounce(
        owner.nodeId,
        b ? reqHeaderLine(header) : encode(header, r.payload),
        r.payloadBytes,
        ridHead('unheard', rid),
      )
      .catch(deliveredLate);
    // Nothing about the request arrives before this turn ends: recorded after its send started.
    this.remote.add(
      {
        rid,
        route: r,
        node: owner.nodeId,
        epoch: owner.epoch,
        sentAt: now,
        cached,
        moving: wasMoving,
        sent,
        dueAt: 0,
        prevDue: undefined,
        nextDue: undefined,
        dueList: undefined,
      },
      timeoutMs + ORIGIN_GRACE_MS,
    );
    const delivered = await sent;
    producer?.end(delivered);
    if (!delivered) return this.unheard(rid);
    if (r.orphaned && r.rid === rid) this.sendOrphan(r);
  }

  /**
   * Nobody heard request `rid` (its owner stopped listening, or is leaving): route it again
   * while that can still help, else fail it. Nobody ran it, so running it elsewhere is safe.
   */
  private async unheard(rid: number): Promise<void> {
    const p = this.remote.settle(rid);
    if (!p || p.route.done) return;
    const r = p.route;
    this.peers.forgetOwner(r.deviceId, p.node);
    const leaving =
      Date.now() + MOVE_POLL_MS < r.deadline &&
      (p.moving || this.peers.hasDeparted(p.node) || (await this.isMoving(r.deviceId).catch(() => false)));
    if (p.cached || leaving) {
      reroutes.unreachable.inc();
      // A remembered owner that stopped listening, or an owner that stopped listening on its
      // way out (it had stopped starting work on the phone): look for the phone again, until
      // the request's deadline (the owner stays in the bus until its liveness lapses).
      if (leaving) {
        r.moving = true;
        await sleep(MOVE_POLL_MS);
      }
      r.state = 'routing';
      r.fresh = true;
      return this.route(r);
    }
    r.sink.fail(relayError('relay_unavailable', 'the node holding the phone is unreachable'));
  }

  /**
   * A request whose node left before running it (a goodbye, or a phone moving away): the phone
   * may have no owner for a moment, whatever told this node first, so it is held as moving.
   */
  private routeAgain(r: Route): void {
    r.state = 'routing';
    r.fresh = true;
    r.moving = true;
    void this.route(r);
  }

  private cancel(r: Route, error: JsonRpcErrorObject = relayError('cancelled')): void {
    if (r.done) return;
    if (r.state === 'local') return r.conn ? r.conn.cancelCall(r.relayId) : r.cancelLocal?.();
    if (r.state === 'remote' && r.rid !== undefined) {
      const p = this.remote.settle(r.rid);
      if (p) this.followUp(p, encode({ t: 'cancel', from: this.ctx.bus.nodeId, rid: r.rid }));
    }
    r.sink.fail(error);
  }

  /** The origin's own deadline for a request sent to another node passed (RemoteRequests). */
  private timedOut(rid: number, r: Route): void {
    if (this.remote.settle(rid)) r.sink.fail(relayError('timeout', 'no answer from the node holding the phone'));
  }

  /** The node message bytes[start, end). */
  private onMessage(bytes: Buffer, start: number, end: number): void {
    let h: Header;
    // A view of the message: a phone frame goes on to the client without a copy.
    let payload: Buffer;
    try {
      ({ header: h, payload } = decodeNodeMessage<Header>(bytes, start, end));
    } catch (err) {
      if (!(err instanceof UnreadableFormatError)) throw err;
      unreadable.nodeMessage.inc();
      this.ctx.log.warn({ bytes: end - start, why: err.message }, 'unreadable node message');
      return;
    }
    switch (h.t) {
      case 'req':
        return void this.served.serve(h, payload);
      case 'note': {
        const conn = this.ctx.hub.device(h.deviceId);
        if (conn && !conn.closed) {
          try {
            conn.notify(
              h.method,
              payload.length ? (parseJson(payload.toString('utf8')) as Record<string, unknown>) : undefined,
            );
          } catch {
            this.ctx.log.warn('malformed forwarded notification');
          }
        }
        return;
      }
      case 'cancel':
        this.served.cancel(h.from, h.rid);
        return;
      case 'orphan':
        this.served.orphan(h.from, h.rid);
        return;
      case 'ccancel':
        for (const f of this.clientCancel) f(h.sessionId, h.requestId);
        return;
      case 'res':
        answered(this.remote.settle(h.rid))?.route.sink.respond(payload);
        return;
      case 'rel':
        this.remote.get(h.rid)?.route.sink.related?.(payload);
        return;
      case 'fail':
        answered(this.remote.settle(h.rid))?.route.sink.fail(h.error);
        return;
      case 'bye': {
        goodbyes.received.inc();
        this.peers.saidBye(h.from);
        this.served.originGone(h.from);
        void this.remote.nodeGone(h.from, 'bye');
        return;
      }
      case 'unheard':
        void this.unheard(h.rid);
        return;
      case 'redo': {
        // The owner did not start the request: the phone is moving away from it (drain), or
        // is not there at all (a stale owner): route it again.
        const p = this.remote.settle(h.rid);
        if (!p || p.route.done) return;
        const r = p.route;
        reroutes[h.why].inc();
        this.peers.forgetOwner(r.deviceId, p.node);
        r.state = 'routing';
        r.fresh = true;
        if (h.why === 'moving') {
          r.moving = true;
          return void sleep(MOVE_POLL_MS).then(() => this.route(r));
        }
        if (++r.gone > MAX_GONE) return void this.failOffline(r);
        void this.route(r);
        return;
      }
    }
  }
}

/** A publish Redis answered late may have reached the owner: it counts as delivered (see send). */
function deliveredLate(err: unknown): boolean {
  return err instanceof BusTimeoutError;
}
