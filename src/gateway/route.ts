// One client request on the origin node, from the moment it is accepted until it is answered:
// where it is (routing, on this node's phone, or sent to the phone's node) and what it needs
// to be sent again. The router (router.ts) moves it between those states.
import type { JsonRpcErrorObject } from '../protocol/errors.ts';
import type { JsonRpcId, JsonRpcRequest } from '../protocol/jsonrpc.ts';
import { withId } from '../protocol/frame.ts';
import type { ClientRequestBytes } from '../protocol/request-bytes.ts';
import type { CallHandle, Caller, DeviceConnection, ReplySink } from './device-connection.ts';
import type { SlotTable } from './slot-table.ts';
import type { Timed } from './deadlines.ts';

let nextSeq = 1;

/** One client request on its way to the phone; it is also the sink the phone's node answers. */
export class Route implements ReplySink {
  /** Its key among the router's active routes. */
  private readonly seq = nextSeq++;
  /** params as JSON, encoded once even if the request is sent more than once. */
  payload?: string;
  /** The same for a `bytes` request (paramsWithCaller). */
  payloadBytes?: Buffer;
  /** A request read from its bytes (startLocal, startRemote): it travels and starts as those bytes. */
  bytes?: ClientRequestBytes;
  callerJson?: Buffer;
  done = false;
  state: 'routing' | 'local' | 'remote' = 'routing';
  cancelLocal?: CallHandle;
  /** A request started by `startLocal`: its relay id on `conn` (cancel and orphan go there). */
  conn?: DeviceConnection;
  relayId = 0;
  rid?: number;
  /** Its client is gone for good (docs/decisions/0042-abandoned-calls.md); told to the phone's node once it runs. */
  orphaned?: boolean;
  /** Times an owner said the phone was not there; the next lookup skips the cache. */
  gone = 0;
  fresh?: boolean;
  /**
   * The phone was seen moving (its mark, its owner's `redo` or goodbye): until the request is
   * sent to the phone's next owner, a phone with no owner is waited for until the request's own
   * deadline, not only while the mark lives — a phone's reconnect after a failed first attempt
   * backs off for seconds (src/device/agent/backoff.ts), and a loaded new node is slow to
   * accept it (docs/decisions/0209-a-moving-phone-is-waited-for-until-the-deadline.md). Set
   * also when the node it was sent to left on purpose: its goodbye can reach this node after
   * the request went out and after the phone was released (docs/decisions/0080-drain-rerouting.md).
   */
  moving = false;
  /** performance.now() when it was last sent to an owner node (phonebridge_bus_round_trip_seconds). */
  sentPerf = 0;
  readonly deadline: number;
  /** What the phone's node answers: the route itself (answers count once, then it is done). */
  get sink(): ReplySink {
    return this;
  }

  constructor(
    private readonly active: SlotTable<number, Route>,
    readonly deviceId: string,
    readonly msg: JsonRpcRequest,
    readonly params: Record<string, unknown> | undefined,
    readonly caller: Caller,
    private readonly out: ReplySink,
    timeoutMs: number,
    /** The clock (Date.now()) as the caller read it. */
    now = Date.now(),
  ) {
    this.deadline = now + timeoutMs;
    active.set(this.seq, this);
  }

  private finish(): boolean {
    if (this.done) return false;
    this.done = true;
    this.active.delete(this.seq);
    return true;
  }

  respond(frame: Buffer): void {
    if (this.finish()) this.out.respond(frame);
  }

  /** The phone's answer on this node (DeviceConnection.onFrame): passed on as received when `out` takes it so. */
  respondAsReceived(view: Buffer, idStart: number, idEnd: number, clientId: JsonRpcId): void {
    if (!this.finish()) return;
    if (this.out.respondAsReceived) this.out.respondAsReceived(view, idStart, idEnd, clientId);
    else this.out.respond(withId(view, idStart, idEnd, clientId));
  }

  /** Progress and the like; dropped once the request is answered, or when its caller takes none. */
  related(frame: Buffer): void {
    if (!this.done) this.out.related?.(frame);
  }

  fail(error: JsonRpcErrorObject): void {
    if (this.finish()) this.out.fail(error);
  }
}

/** A request `startLocal` started: cancel or orphan it with Router.cancelRoute / orphanRoute. */
export type LocalRoute = Route;

/**
 * Origin side: a request sent to the node that owns its phone, until that node answers. Its
 * deadline is threaded through it (src/gateway/deadlines.ts): no Node timer per request.
 */
export interface RemotePending extends Timed {
  rid: number;
  route: Route;
  node: string;
  /** The owner's claim the request was addressed to: tells a restarted owner from its predecessor. */
  epoch: number;
  sentAt: number;
  cached: boolean;
  /** The request was waiting for a moving phone when it was sent (see unheard). */
  moving: boolean;
  /**
   * Settles once the bus has taken the request. Whatever the origin says about it later
   * (cancel, orphan) waits for this: the request may have gone on another Redis connection,
   * and a cancel must not overtake it (docs/decisions/0225-quiet-requests.md).
   */
  sent: Promise<boolean>;
}
