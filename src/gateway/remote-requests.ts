// The origin's requests out at other nodes: what was sent where, and what becomes of a request
// whose node leaves on purpose (goodbye), dies (the bus sees its liveness lapse), or loses its
// phone to another node while the request waits (the owner check). Answers and the router's own
// decisions settle requests here too (router.ts); each request is settled once.
import { relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import type { DeviceOwner } from '../bus/index.ts';
import { reroutes } from '../metrics.ts';
import type { GatewayContext } from './context.ts';
import type { PeerDirectory } from './peer-directory.ts';
import type { RemotePending, Route } from './route.ts';
import { byFirst, idTable } from './slot-table.ts';
import { Deadlines } from './deadlines.ts';

/** An owner lookup that failed (the bus unavailable): where the phone is, nobody here can tell. */
const UNKNOWN = Symbol('owner unknown');

/** Remote requests older than this have their owner re-checked (a phone that left a dead node). */
const OWNER_CHECK_MS = 500;

/** What the table needs from the router. */
export interface RemoteRequestsHost {
  /** The request's deadline (and the grace for its answer to cross back) passed unanswered. */
  timedOut(rid: number, r: Route): void;
  /** Routes a request again from the start: its node left before running it. */
  routeAgain(r: Route): void;
  /**
   * Whether `node` handed the phone over on purpose a moment ago (a drain: it had stopped
   * starting work on the phone). A phone moving between two other nodes says nothing of it.
   */
  movedFrom(deviceId: string, node: string): Promise<boolean>;
}

export class RemoteRequests {
  /** By request id; a table that does not churn (docs/decisions/0236-tables-that-do-not-churn.md). */
  private readonly pending = idTable<RemotePending>();
  private readonly deadlines: Deadlines<RemotePending>;
  private readonly ownerCheck: NodeJS.Timeout;
  private checking = false;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly peers: PeerDirectory,
    private readonly host: RemoteRequestsHost,
  ) {
    this.deadlines = new Deadlines<RemotePending>((p) => host.timedOut(p.rid, p.route));
    this.ownerCheck = setInterval(() => void this.checkOwners(), OWNER_CHECK_MS);
    this.ownerCheck.unref();
  }

  /** Request `p.rid`, out until its answer or `timeoutMs` from now. */
  add(p: RemotePending, timeoutMs: number): void {
    this.pending.set(p.rid, p);
    this.deadlines.start(p, timeoutMs);
  }

  /** The request `rid`, still unsettled. */
  get(rid: number): RemotePending | undefined {
    return this.pending.get(rid);
  }

  /** Takes request `rid` out (its timer stopped): whoever gets it decides its end. */
  settle(rid: number): RemotePending | undefined {
    const p = this.pending.get(rid);
    if (!p) return undefined;
    this.deadlines.cancel(p);
    this.pending.delete(rid);
    return p;
  }

  /** Fails every unsettled request (the bus is gone: no answer can come back). */
  failAll(error: JsonRpcErrorObject): void {
    for (const [rid] of this.pending.entries().sort(byFirst)) this.settle(rid)?.route.sink.fail(error);
  }

  /** Stops the owner check and every deadline: nothing settles a request after this. */
  close(): void {
    clearInterval(this.ownerCheck);
    this.deadlines.clear();
  }

  /**
   * Requests still waiting on a node that left: it said goodbye (`bye`), or the bus saw its
   * process go (`down`: liveness lapsed, left, or restarted under the same id). See
   * afterNodeDown for what each request needs; a goodbye settles them all at once, since a
   * node that says goodbye has answered everything it started.
   */
  async nodeGone(node: string, how: 'bye' | 'down'): Promise<void> {
    const departure = this.peers.departure(node);
    const saidBye = departure !== undefined;
    try {
      await this.settleGone(node, how, saidBye);
    } finally {
      // The departure is complete once the bus sees the process gone: a process that announces
      // this id later is a new node, whose requests are judged on their own. Forgotten only
      // once every request waiting on the node is decided: until then the owner check
      // (checkOwners) must still see that the node left on purpose, or it fails a request the
      // goodbye means to route again.
      if (how === 'down') this.peers.endDeparture(node, departure);
    }
  }

  private async settleGone(node: string, how: 'bye' | 'down', saidBye: boolean): Promise<void> {
    const owners = new Map<string, Promise<DeviceOwner | undefined | typeof UNKNOWN>>();
    for (const [rid, p] of this.pending.entries().sort(byFirst)) {
      if (p.node !== node) continue;
      const d = p.route.deviceId;
      if (!owners.has(d))
        owners.set(
          d,
          this.ctx.bus.ownerOf(d).catch(() => UNKNOWN),
        );
      const owner = how === 'bye' ? undefined : await owners.get(d)!;
      const next =
        how === 'bye' ? 'route again' : owner === UNKNOWN ? 'unknown' : await this.afterNodeDown(p, owner, saidBye);
      if (next === 'wait') continue;
      if (!this.settle(rid) || p.route.done) continue;
      if (next === 'route again') {
        reroutes.node_left.inc();
        this.host.routeAgain(p.route);
      } else if (next === 'unknown') {
        // The bus cannot say where the phone is now: the relay's trouble, not the phone's.
        p.route.sink.fail(
          relayError(
            'relay_unavailable',
            'the relay node holding the phone stopped, and the cluster bus is unavailable',
          ),
        );
      } else {
        p.route.sink.fail(relayError('device_offline', 'the relay node holding the phone stopped'));
      }
    }
  }

  /**
   * A request was waiting on a node whose process the bus saw go. If the node's id holds the
   * very claim the request was addressed to, that claim is the live process's (a restart under
   * the same id reaps its predecessor's claims before anyone hears of it): the request is
   * there, so wait for its answer. Otherwise the request was never started if the node said
   * goodbye or marked the phone as moving away from it (it had stopped starting work on the
   * phone): route it again. A crashed node may have run it, even one the phone had just moved
   * to from a third node: fail it, clearly.
   */
  private async afterNodeDown(
    p: RemotePending,
    owner: DeviceOwner | undefined,
    saidBye: boolean,
  ): Promise<'wait' | 'route again' | 'fail'> {
    if (owner?.nodeId === p.node && owner.epoch === p.epoch) return 'wait';
    if (saidBye || (await this.host.movedFrom(p.route.deviceId, p.node).catch(() => false))) return 'route again';
    return 'fail';
  }

  /**
   * A node killed without a goodbye is declared dead only after its liveness lapses (≈ 4 s),
   * but its phones reconnect elsewhere within about a second. Requests sent to it that have
   * waited a while are failed as soon as their phone is owned by another node. A phone owned by
   * none says nothing here: its node may only have lapsed in a Redis outage, still serving the
   * request (docs/decisions/0210-no-phone-offline-because-redis-was-down.md); a node that really
   * died is reported down (nodeGone), and one whose phone left answers the request itself.
   */
  private async checkOwners(): Promise<void> {
    if (this.checking || this.pending.size === 0 || !this.ctx.bus.available) return;
    this.checking = true;
    try {
      const old = Date.now() - OWNER_CHECK_MS;
      const byDevice = new Map<string, Array<[number, RemotePending]>>();
      for (const e of this.pending.entries().sort(byFirst)) {
        if (e[1].sentAt > old) continue;
        const list = byDevice.get(e[1].route.deviceId) ?? [];
        list.push(e);
        byDevice.set(e[1].route.deviceId, list);
      }
      for (const [deviceId, list] of byDevice) {
        const owner = await this.peers.lookupOwner(deviceId);
        const handedOverBy = new Map<string, boolean>();
        for (const [rid, p] of list) {
          if (!owner || owner.nodeId === p.node) continue;
          // A phone handed over on purpose: its old node had stopped starting work on it, so its
          // answer, its `redo`, its goodbye or its departure decides (nodeGone), not a guess.
          if (this.peers.hasDeparted(p.node)) continue;
          let handedOver = handedOverBy.get(p.node);
          if (handedOver === undefined)
            handedOverBy.set(p.node, (handedOver = await this.host.movedFrom(deviceId, p.node)));
          if (handedOver) continue;
          this.settle(rid)?.route.sink.fail(
            relayError('device_offline', 'the phone left the relay node that was serving the request'),
          );
        }
      }
    } catch {
      // bus trouble: the router fails them when the bus reports it unavailable
    } finally {
      this.checking = false;
    }
  }
}
