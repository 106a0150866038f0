// One phone socket's protocol, seen from the relay: every forwarded request gets a
// relay-unique id, and the phone's answers go back to whoever asked with the client's id (and
// progress token) restored. What the relay asks the phone itself as its MCP client (initialize
// once per socket, tools/list kept for scope checks) is its surface, src/gateway/phone-surface.ts.
import { Buffer } from 'node:buffer';
import type { WebSocket } from '../uws.ts';
import { checkedWhole, inspectPhoneFrame, withId } from '../protocol/frame.ts';
import { forwardedFrame, requestFrame, type ClientRequestBytes } from '../protocol/request-bytes.ts';
import {
  classify,
  errorResponse,
  inexactlyNumbered,
  resultResponse,
  type JsonRpcId,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts';
import { JsonNumberText, stringifyJson } from '../protocol/exact-json.ts';

import { INVALID_PARAMS, METHOD_NOT_FOUND, relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import { checkMethod, insufficientScopeError, methodRefusal, type ToolCatalog } from '../protocol/scopes.ts';
import type { Scope } from '../store/types.ts';
import type { Logger } from '../log.ts';
import { framesFromDevice, framesTooBig, rateLimited, sentToPhone } from '../metrics.ts';
import { scheduleWrite, type TurnWriter } from '../turn-writes.ts';
import { PhoneSurface } from './phone-surface.ts';
import { Deadlines, type Timed } from './deadlines.ts';
import { endOnAnswer, tracingOn, withTraceparent, type Context } from '../observability/tracing.ts';
import { phoneCallSpan } from '../observability/relay-spans.ts';
import { byFirst, idTable, keyTable } from './slot-table.ts';

/** A client's progress token, a number no double holds as written (src/protocol/exact-json.ts). */
type ProgressToken = string | number | JsonNumberText;

const byteLength = (frame: string | Buffer) => (typeof frame === 'string' ? Buffer.byteLength(frame) : frame.length);

export const MAX_FRAME_BYTES = 256 * 1024;

/** A notification to the phone, as the frame it leaves in. */
export function notificationFrame(method: string, params?: Record<string, unknown>): string {
  return stringifyJson(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
}

/** The UTF-8 size of that frame. */
export function notificationFrameBytes(method: string, params?: Record<string, unknown>): number {
  return byteLength(notificationFrame(method, params));
}

function shortMethod(method: string): string {
  return method.length <= 200 ? method : `${method.slice(0, 200)}…`;
}
/** What uWS may hold unsent for one phone socket (its maxBackpressure); a frame beyond it is refused. */
export const MAX_BACKPRESSURE_BYTES = 8 * 1024 * 1024;

/** Every phone's requests in flight, by deadline: one timer per distinct timeout in the process. */
const requestDeadlines = new Deadlines<Pending>((p) => p.conn.timedOut(p.relayId, p.timeoutMs));

// ws.cork runs its callback synchronously: one shared callback instead of a closure per turn.
let corking: DeviceConnection;
const sendCorking = () => corking.sendQueued();

export const CLOSE = {
  superseded: 4001,
  unauthorised: 4003,
  removed: 4004,
  tooBig: 1009,
  relayError: 1011,
  restarting: 1012,
  idle: 1001,
  unsupportedData: 1003,
} as const;

/** Where the phone's answer to one forwarded request goes. */
export interface ReplySink {
  /** The response frame (UTF-8 JSON), with the client's id already restored. */
  respond(frame: Buffer): void;
  /**
   * Instead of respond: the phone's frame as received, its relay id at [idStart, idEnd) where
   * respond's frame would carry `clientId` — a view of uWS's memory, valid during this call
   * only: copy what is kept. Spares the relay's own requests a copy of each 35 KB catalog page
   * (docs/decisions/0141-accept-floor.md, 0144-accept-cuts.md), and lets an answer written at
   * the end of the turn be copied into a reused buffer (docs/decisions/0235-pooled-answer-buffers.md).
   */
  respondAsReceived?(frame: Buffer, idStart: number, idEnd: number, clientId: JsonRpcId): void;
  /**
   * The sink parses the answer whole, or finds it byte for byte equal to one it parsed (the
   * relay's own requests: src/gateway/phone-surface.ts): the one-pass check that an answer is
   * one whole JSON object (src/protocol/frame.ts) is left to that
   * (docs/decisions/0255-answers-the-relay-parses-skip-the-whole-check.md).
   */
  readonly checksWhole?: true;
  /** A message about this request that travels before its response (progress). */
  related?(frame: Buffer): void;
  fail(error: JsonRpcErrorObject): void;
}

/** Who is asking, as far as the phone's surface is concerned. */
export interface Caller {
  scopes: readonly Scope[];
  /** The credential asking (its per-credential share of the phone, its revocation). */
  tokenId?: string;
  accountId?: string;
  /** The span this request continues on this node, while tracing is on (src/observability/). */
  trace?: Context;
  /**
   * A 2026-07-28 tools/call whose `Mcp-Param-*` headers the origin could not check (no tool
   * catalog there): those headers, for the check where the phone is (src/gateway/tool-header-check.ts).
   */
  toolHeaders?: Readonly<Record<string, string>>;
}

/** A request in flight at the phone; its deadline is threaded through it (src/gateway/deadlines.ts). */
interface Pending extends Timed {
  conn: DeviceConnection;
  relayId: number;
  timeoutMs: number;
  clientId: JsonRpcId;
  sink: ReplySink;
  method: string;
  /** The client's own progress token, when the request carried one. */
  progressToken?: ProgressToken;
  /** The share of the credential this request counts against (none for the relay's own). */
  share?: Share;
  /** A wait_for_events call (its own, smaller share per credential). */
  wait: boolean;
  /** Abandoned (docs/decisions/0042-abandoned-calls.md): counted against nobody's share, bounded per phone. */
  orphan: boolean;
}

/** One credential's calls in flight on a socket, and its key's hash in `shares`. */
interface Share {
  readonly tokenId: string;
  readonly hash: number;
  calls: number;
  waits: number;
}

/** What one credential may hold on this phone, and how many abandoned calls the phone keeps. */
export interface ConnectionLimits {
  maxInFlightPerKey: number;
  maxWaitsPerKey: number;
  maxOrphans: number;
}

/**
 * The function cancels the call (notifications/cancelled to the phone); `orphan` says its
 * client is gone for good: it runs on outside every share, unless the phone holds too many.
 */
export type CallHandle = (() => void) & { orphan?: () => void };

const WAIT_TOOL = 'wait_for_events';

export interface DeviceSocketData {
  deviceId: string;
  accountId: string;
  /** Set when auth failed: the socket is closed as soon as it opens, with this reason... */
  rejectReason?: string;
  /** ...and this code: 4003 (unauthorised), 4004 (a removed device signed) or 1011 (the relay could not check). */
  rejectCode?: number;
  conn?: DeviceConnection;
  /** The socket's authentication span, while tracing is on: its handshake and close join that trace. */
  trace?: Context;
}

export interface DeviceConnectionEvents {
  /** A phone notification for every listening stream of this device. */
  notification(deviceId: string, frame: Buffer): void;
  initialized(deviceId: string, result: unknown): void;
}

type TeardownReason = 'device_offline' | 'device_removed' | 'superseded' | 'relay_error';

export class DeviceConnection implements TurnWriter {
  readonly deviceId: string;
  readonly accountId: string;
  readonly connectedAt = Date.now();
  lastFrameAt = Date.now();
  /** What the phone serves: its initialize result and tool catalog. */
  readonly surface: PhoneSurface;
  closed = false;
  /** initialize and the catalog are done (ready() resolved): requests can start at once. */
  isReady = false;
  /** Ownership on the bus: the epoch of this socket's claim, once known. */
  epoch?: number;
  claim?: Promise<number | undefined>;
  private nextId = 1;
  /** By relay id; a table that does not churn (docs/decisions/0236-tables-that-do-not-churn.md). */
  private readonly pending = idTable<Pending>();
  /** Per credential: its calls and waits in flight (orphans not counted); a table as `pending`. */
  private readonly shares = keyTable<Share>();
  /**
   * The last credential seen here and its hash in `shares`: a call's admit and track, and the
   * calls of one credential in a row, hash its id once (a string hash costs several ns a character).
   */
  private lastShareToken: string | undefined = undefined;
  private lastShareHash = 0;
  /** Abandoned calls still running, oldest first. */
  private readonly orphans = new Set<number>();
  private readonly limits: ConnectionLimits;
  private readyPromise?: Promise<void>;
  /** Frames of this turn, written together at its end (docs/decisions/0050-one-write-per-answer.md); the relay id each one carries, or 0. */
  private outbox: Array<string | Buffer> = [];
  private outboxIds: number[] = [];
  private outboxBytes = 0;

  constructor(
    private readonly ws: WebSocket<DeviceSocketData>,
    data: DeviceSocketData,
    private readonly events: DeviceConnectionEvents,
    private readonly log: Logger,
    /** The deadline of the relay's own requests (initialize, tools/list). */
    internalTimeoutMs = 30_000,
    /** Client requests in flight on this socket beyond which new ones are refused (device_busy). */
    private readonly maxInFlight = 2_048,
    limits: Partial<ConnectionLimits> = {},
  ) {
    this.deviceId = data.deviceId;
    this.accountId = data.accountId;
    this.limits = {
      maxInFlightPerKey: Math.min(maxInFlight, limits.maxInFlightPerKey ?? Math.max(64, Math.floor(maxInFlight / 2))),
      maxWaitsPerKey: limits.maxWaitsPerKey ?? 4,
      maxOrphans: limits.maxOrphans ?? 256,
    };
    this.surface = new PhoneSurface(this, events, log, internalTimeoutMs);
  }

  /** The phone's initialize result, once it answered. */
  get initResult(): unknown {
    return this.surface.initResult;
  }

  /** The phone's tools (all pages), for scope checks; undefined if it serves no tools. */
  get tools(): ToolCatalog | undefined {
    return this.surface.tools;
  }

  get inFlight(): number {
    return this.pending.size;
  }

  /** Abandoned calls still running on this socket. */
  get orphaned(): number {
    return this.orphans.size;
  }

  /** One credential's calls in flight on this socket (orphans not counted). */
  inFlightOf(tokenId: string): number {
    return this.shares.get(tokenId)?.calls ?? 0;
  }

  /** initialize + notifications/initialized, then the tool catalog: once per socket. */
  ready(): Promise<void> {
    this.readyPromise ??= (async () => {
      await this.surface.load();
      this.isReady = true;
    })();
    return this.readyPromise;
  }

  /**
   * One client request: refused (a method the phone did not advertise, or outside the caller's
   * scopes: src/protocol/scopes.ts), answered from the cache (tools/list), or forwarded. Returns a cancel function for a client that goes away.
   */
  handleClientRequest(
    msg: JsonRpcRequest,
    params: Record<string, unknown> | undefined,
    caller: Caller,
    sink: ReplySink,
    timeoutMs: number,
  ): CallHandle {
    const name = params?.name;
    const wait = this.admit(msg.method, msg.id, params !== undefined && 'name' in params, name, caller, sink);
    if (wait === undefined) return () => {};
    return this.forward({ method: msg.method, params }, msg.id, sink, timeoutMs, {
      tokenId: caller.tokenId,
      wait,
      trace: caller.trace,
    });
  }

  /**
   * handleClientRequest for a request held as bytes (src/protocol/request-bytes.ts): the same
   * checks, then its frame built from the client's bytes with the relay id and `callerJson`.
   * Returns the relay id for cancelCall / orphanCall, or 0 when it was answered at once.
   */
  handleClientBytes(
    req: ClientRequestBytes,
    callerJson: Buffer,
    caller: Caller,
    sink: ReplySink,
    timeoutMs: number,
  ): number {
    const wait = this.admit(req.method, req.id, req.toolName !== undefined, req.toolName, caller, sink);
    if (wait === undefined) return 0;
    if (this.closed) {
      sink.fail(relayError('device_offline'));
      return 0;
    }
    const relayId = this.nextId++;
    const frame = req.forwarded
      ? forwardedFrame(relayId, req.method, req.body)
      : requestFrame(req, relayId, callerJson);
    if (!this.track(relayId, frame, req.id, sink, timeoutMs, req.method, undefined, caller.tokenId, wait)) return 0;
    return relayId;
  }

  /**
   * Refusals and answers from the cache, which come first: they cost the phone nothing, so a
   * busy phone never turns them into device_busy. Undefined when `sink` got its answer;
   * otherwise whether the request is a wait_for_events call.
   */
  private admit(
    method: string,
    id: JsonRpcId,
    hasName: boolean,
    name: unknown,
    caller: Caller,
    sink: ReplySink,
  ): boolean | undefined {
    const surface = this.surface;
    const capabilities = (surface.initResult as { capabilities?: unknown } | undefined)?.capabilities;
    const allowed = checkMethod(method, capabilities, caller.scopes);
    if (!allowed.ok) {
      sink.fail(methodRefusal(allowed));
      return undefined;
    }
    const tools = surface.tools;
    if (tools && method === 'tools/list') {
      sink.respond(Buffer.from(resultResponse(id, { tools: tools.visibleTo(caller.scopes) })));
      return undefined;
    }
    if (tools && allowed.perTool) {
      const verdict = tools.check(hasName ? name : undefined, caller.scopes);
      if (!verdict.ok) {
        if (verdict.reason === 'unknown_tool')
          sink.fail({
            code: INVALID_PARAMS,
            message:
              hasName && typeof name === 'string'
                ? `Unknown tool: ${name}`
                : 'Invalid params: params.name must be a string (the tool to call)',
          });
        else sink.fail(insufficientScopeError(verdict.scope));
        return undefined;
      }
    }
    if (this.pending.size - this.orphans.size >= this.maxInFlight) {
      // Bounds what one phone's clients (and the relay's own catalog reloads) can pile up on a
      // node; abandoned calls are bounded apart (--max-orphans). The phone itself is not asked.
      rateLimited.phone_in_flight.inc();
      sink.fail(relayError('device_busy', `${this.maxInFlight} requests already in flight`));
      return undefined;
    }
    const wait = method === 'tools/call' && name === WAIT_TOOL;
    const share =
      caller.tokenId === undefined ? undefined : this.shares.get(caller.tokenId, this.shareHash(caller.tokenId));
    if (share && share.calls >= this.limits.maxInFlightPerKey) {
      // A credential's fair share of the phone: one key cannot take the slots of the others.
      rateLimited.key_in_flight.inc();
      sink.fail(relayError('device_busy', `this key already has ${share.calls} requests in flight on the phone`));
      return undefined;
    }
    if (wait && share && share.waits >= this.limits.maxWaitsPerKey) {
      rateLimited.key_waits.inc();
      sink.fail(relayError('device_busy', `this key already has ${share.waits} ${WAIT_TOOL} calls in flight`));
      return undefined;
    }
    return wait;
  }

  /**
   * Sends a request to the phone under a fresh relay id (also its progress token, if it
   * carried one). The sink gets exactly one of respond/fail. Returns a cancel function.
   */
  forward(
    msg: { method: string; params?: Record<string, unknown> },
    clientId: JsonRpcId,
    sink: ReplySink,
    timeoutMs: number,
    owner: { tokenId?: string; wait?: boolean; trace?: Context } = {},
  ): CallHandle {
    if (this.closed) {
      sink.fail(relayError('device_offline'));
      return () => {};
    }
    const relayId = this.nextId++;
    let progressToken: ProgressToken | undefined;
    const meta = msg.params?._meta as Record<string, unknown> | undefined;
    if (
      meta &&
      (typeof meta.progressToken === 'string' ||
        typeof meta.progressToken === 'number' ||
        meta.progressToken instanceof JsonNumberText)
    ) {
      progressToken = meta.progressToken;
      // Client tokens may collide across sessions: the phone sees ours (the relay id).
      msg = { ...msg, params: { ...msg.params, _meta: { ...meta, progressToken: relayId } } };
    }
    if (tracingOn && owner.trace) {
      // The phone round trip; the phone continues it from _meta.traceparent (docs/PROTOCOL.md).
      const span = phoneCallSpan(owner.trace, msg, relayId);
      msg = { ...msg, params: withTraceparent(msg.params, span) };
      sink = endOnAnswer(sink, span);
    }
    const frame = stringifyJson({ jsonrpc: '2.0', id: relayId, method: msg.method, params: msg.params });
    if (!this.track(relayId, frame, clientId, sink, timeoutMs, msg.method, progressToken, owner.tokenId, owner.wait))
      return () => {};
    return Object.assign(() => this.cancelCall(relayId), { orphan: () => this.orphanCall(relayId) });
  }

  /** Registers a request under its relay id and queues its frame; false (sink failed) if the socket is saturated. */
  private track(
    relayId: number,
    frame: string | Buffer,
    clientId: JsonRpcId,
    sink: ReplySink,
    timeoutMs: number,
    method: string,
    progressToken: ProgressToken | undefined,
    tokenId: string | undefined,
    waitCall: boolean | undefined,
  ): boolean {
    const frameBytes = byteLength(frame);
    if (frameBytes > MAX_FRAME_BYTES) {
      // The body fitted, but the frame carries the relay's id and caller context too.
      framesTooBig.client.inc();
      sink.fail(
        relayError(
          'too_large',
          `the frame to the phone would be ${frameBytes} bytes (caller context included), over 262144`,
        ),
      );
      return false;
    }
    const wait = waitCall === true;
    const p: Pending = {
      conn: this,
      relayId,
      timeoutMs,
      clientId,
      sink,
      method,
      progressToken,
      share: undefined,
      wait,
      orphan: false,
      dueAt: 0,
      prevDue: undefined,
      nextDue: undefined,
      dueList: undefined,
    };
    requestDeadlines.start(p, timeoutMs);
    this.pending.set(relayId, p);
    if (tokenId !== undefined) {
      const hash = this.shareHash(tokenId);
      let share = this.shares.get(tokenId, hash);
      if (!share) this.shares.set(tokenId, (share = { tokenId, hash, calls: 0, waits: 0 }), hash);
      p.share = share;
      share.calls++;
      if (wait) share.waits++;
    }
    if (!this.sendFrame(frame, relayId, frameBytes)) {
      this.settle(relayId);
      sink.fail(relayError('relay_error', 'phone socket is saturated'));
      return false;
    }
    return true;
  }

  /** The request's deadline passed: the phone is told, the caller gets `timeout`. */
  timedOut(relayId: number, timeoutMs: number): void {
    const p = this.settle(relayId);
    if (!p) return;
    // MCP: "The initialize request MUST NOT be cancelled by clients"; a phone that never
    // answers it is closed instead (PhoneSurface.load fails).
    if (p.method !== 'initialize') this.sendCancelled(relayId, 'timeout');
    p.sink.fail(relayError('timeout', `no answer within ${Math.round(timeoutMs / 1000)} s`));
  }

  /** The caller cancels a request it started (forward's handle, or a relay id from handleClientBytes). */
  cancelCall(relayId: number): void {
    const p = this.settle(relayId);
    if (!p) return;
    this.sendCancelled(relayId, 'cancelled by the client');
    p.sink.fail(relayError('cancelled'));
  }

  /**
   * The call's client is gone and nothing can resume its answer: it runs on (disconnection is
   * not cancellation) outside its credential's share and outside --max-in-flight; beyond
   * --max-orphans per phone the oldest orphan is cancelled at the phone.
   */
  orphanCall(relayId: number): void {
    const p = this.pending.get(relayId);
    if (!p || p.orphan) return;
    this.release(p);
    p.orphan = true;
    this.orphans.add(relayId);
    while (this.orphans.size > this.limits.maxOrphans) {
      const oldest = this.orphans.values().next().value!;
      const o = this.settle(oldest);
      if (!o) continue;
      this.sendCancelled(oldest, 'abandoned by its client');
      o.sink.fail(relayError('cancelled', 'abandoned by its client'));
    }
  }

  private shareHash(tokenId: string): number {
    if (tokenId !== this.lastShareToken) {
      this.lastShareToken = tokenId;
      this.lastShareHash = this.shares.hashOf(tokenId);
    }
    return this.lastShareHash;
  }

  /** Gives a request's place in its credential's share back. */
  private release(p: Pending): void {
    const share = p.share;
    if (p.orphan || !share) return;
    share.calls--;
    if (p.wait) share.waits--;
    // At zero nothing refers to it any more: the next call of the credential makes a new one.
    if (share.calls <= 0) this.shares.delete(share.tokenId, share.hash);
  }

  /** Fire-and-forget notification to the phone. */
  notify(method: string, params?: Record<string, unknown>): void {
    this.sendOwnFrame(notificationFrame(method, params), method);
  }

  /**
   * A frame the relay writes itself (a notification, an answer to the phone's own request):
   * never one over the phone's limit, which would cost the phone its socket. Callers that take
   * a client's bytes measure them first (the endpoint's notifications, `track`).
   */
  private sendOwnFrame(frame: string, what: string): void {
    const bytes = byteLength(frame);
    if (bytes <= MAX_FRAME_BYTES) this.sendFrame(frame, 0, bytes);
    else
      this.log.warn(
        { deviceId: this.deviceId, method: what.slice(0, 100), bytes },
        'frame to phone over 256 KiB not sent',
      );
  }

  private sendCancelled(relayId: number, reason: string): void {
    this.notify('notifications/cancelled', { requestId: relayId, reason });
  }

  private settle(relayId: number): Pending | undefined {
    const p = this.pending.get(relayId);
    if (!p) return undefined;
    requestDeadlines.cancel(p);
    this.pending.delete(relayId);
    this.orphans.delete(relayId);
    this.release(p);
    return p;
  }

  /**
   * Queues a frame for the end of this turn: frames for one phone produced in the same turn
   * leave in one write, inside this socket's cork (docs/decisions/0050-one-write-per-answer.md). False when the socket is
   * closed or holds more than its backpressure limit (the frame is not sent). `bytes`: its
   * UTF-8 length, when the caller has measured it already.
   */
  sendFrame(frame: string | Buffer, relayId = 0, bytes = byteLength(frame)): boolean {
    if (this.closed) return false;
    if (this.ws.getBufferedAmount() + this.outboxBytes + bytes > MAX_BACKPRESSURE_BYTES) return false;
    if (this.outbox.length === 0) scheduleWrite(this);
    this.outbox.push(frame);
    this.outboxIds.push(relayId);
    this.outboxBytes += bytes;
    sentToPhone(bytes);
    return true;
  }

  writeQueued(): void {
    if (this.closed) {
      this.outbox = [];
      this.outboxIds = [];
      this.outboxBytes = 0;
      return;
    }
    if (this.outbox.length === 0) return; // written already (writeInOpen)
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the writer being flushed, read by the write path to tell its own cork from a foreign one
    corking = this;
    this.ws.cork(sendCorking);
  }

  /**
   * From uWS's open handler, where this socket is still corked with its 101 response: what
   * open queued (the initialize request) leaves in the same write as the 101 instead of a
   * write of its own at the end of the turn (docs/decisions/0141-accept-floor.md). The turn's
   * scheduled write finds nothing left.
   */
  writeInOpen(): void {
    if (!this.closed && this.outbox.length > 0) this.sendQueued();
  }

  /** Inside this socket's cork. */
  sendQueued(): void {
    const frames = this.outbox;
    const ids = this.outboxIds;
    this.outbox = [];
    this.outboxIds = [];
    this.outboxBytes = 0;
    for (let i = 0; i < frames.length; i++) {
      // 0 = buffered (drains later), 1 = sent, 2 = dropped by the backpressure limit.
      if (this.ws.send(frames[i], false, false) !== 2 || ids[i] === 0) continue;
      this.settle(ids[i])?.sink.fail(relayError('relay_error', 'phone socket is saturated'));
    }
  }

  /**
   * One text frame from the phone. `view` may be a view of uWS's memory, valid only until this
   * returns: whatever is kept is copied first (withId's answer is a copy).
   */
  onFrame(view: Buffer): void {
    this.lastFrameAt = Date.now();
    framesFromDevice.inc();
    let f = inspectPhoneFrame(view, false);
    if (f.kind === 'response' && f.unchecked && !(typeof f.id === 'number' && this.pending.get(f.id)?.sink.checksWhole))
      f = checkedWhole(view, f);
    if (f.kind === 'response') {
      const p = typeof f.id === 'number' ? this.settle(f.id) : undefined;
      // Unknown ids are late answers to cancelled or timed-out requests: dropped by design.
      if (p?.sink.respondAsReceived) p.sink.respondAsReceived(view, f.idStart, f.idEnd, p.clientId);
      else if (p) p.sink.respond(withId(view, f.idStart, f.idEnd, p.clientId));
      return;
    }
    if (f.kind === 'invalid') {
      this.log.warn({ deviceId: this.deviceId, reason: f.reason, bytes: view.length }, 'invalid frame from phone');
      // An answer that is not one whole JSON object (cut short, or trailing data) is never
      // forwarded; if its id was read whole, its call fails now rather than at its deadline.
      const p = typeof f.id === 'number' ? this.settle(f.id) : undefined;
      p?.sink.fail(relayError('relay_error', 'the phone sent an answer that is not one whole JSON object'));
      return;
    }
    const c = classify(f.value);
    // A request whose id is a number no double holds is the phone's to number as it likes: it
    // is answered under that id as written (src/protocol/exact-json.ts).
    const request = c.kind === 'request' ? c.msg : inexactlyNumbered(f.value);
    if (request) {
      // The relay never forwards phone-originated requests; it answers ping itself.
      if (request.method === 'ping') this.sendOwnFrame(resultResponse(request.id, {}), 'ping');
      else
        this.sendOwnFrame(
          errorResponse(request.id, {
            code: METHOD_NOT_FOUND,
            // The method as far as a log line would show it: the answer stays within the frame limit.
            message: `Method not found: the relay does not forward ${shortMethod(request.method)} to clients`,
          }),
          request.method,
        );
      return;
    }
    if (c.kind !== 'notification') {
      this.log.warn({ deviceId: this.deviceId, bytes: view.length }, 'unexpected frame from phone');
      return;
    }
    const params = c.msg.params ?? {};
    switch (c.msg.method) {
      case 'notifications/progress': {
        // Only to the stream of the request that carried the token; late progress is dropped.
        const p = typeof params.progressToken === 'number' ? this.pending.get(params.progressToken) : undefined;
        if (p?.progressToken !== undefined && p.sink.related) {
          p.sink.related(
            Buffer.from(stringifyJson({ ...c.msg, params: { ...params, progressToken: p.progressToken } })),
          );
        }
        return;
      }
      case 'notifications/cancelled':
        // Its requestId names a request the phone sent, in the phone's own numbering (MCP: a
        // cancellation goes the way its request went), never one of the relay's ids; and the
        // relay answers the phone's requests at once, so there is nothing left to cancel.
        return;
      // Both keep the frame: a copy of the view.
      case 'notifications/tools/list_changed':
        this.surface.toolsChanged(Buffer.from(view));
        return;
      default:
        this.events.notification(this.deviceId, Buffer.from(view));
    }
  }

  /**
   * Fails everything in flight; the socket itself is closed by the caller or already gone.
   * `detail` tells their callers why (errors.ts `relayError`).
   */
  teardown(reason: TeardownReason, detail?: string): void {
    if (this.closed) return;
    this.closed = true;
    this.surface.release();
    for (const [id, p] of this.pending.entries().sort(byFirst)) {
      requestDeadlines.cancel(p);
      this.pending.delete(id);
      p.sink.fail(relayError(reason, detail));
    }
    this.shares.clear();
    this.orphans.clear();
  }

  /** Closes the socket with a code; safe to call more than once. */
  close(code: number, reason: string, failWith: TeardownReason = 'device_offline', detail?: string): void {
    if (this.closed) return;
    if (this.outbox.length > 0) this.writeQueued(); // what this turn queued still precedes the close
    this.teardown(failWith, detail);
    try {
      this.ws.end(code, reason);
    } catch {
      // already closed by the peer
    }
  }
}
