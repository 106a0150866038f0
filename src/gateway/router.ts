// Getting a client request to the phone wherever its socket is: on this node (hub), or on
// the node that owns it (bus). The owner node runs the same DeviceConnection logic either
// way; the origin only relays the answer back to its HTTP exchange.
import { relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import type { JsonRpcRequest } from '../protocol/jsonrpc.ts';
import { BusUnavailableError } from '../bus/index.ts';
import type { Scope } from '../store/types.ts';
import type { Caller, ReplySink } from './device-connection.ts';
import type { GatewayContext } from './context.ts';

/** Extra time the origin waits beyond the owner's own timeout before giving up itself. */
const ORIGIN_GRACE_MS = 2_000;

// Node-to-node messages: one JSON header line, then an optional raw payload (a phone frame
// travels unescaped).
type Header =
  | { t: 'req'; from: string; rid: number; deviceId: string; id: JsonRpcRequest['id']; method: string; scopes: Scope[]; timeoutMs: number }
  | { t: 'note'; deviceId: string; method: string }
  | { t: 'cancel'; from: string; rid: number }
  | { t: 'res' | 'rel'; rid: number }
  | { t: 'fail'; rid: number; error: JsonRpcErrorObject };

function encode(h: Header, payload = ''): string {
  return `${JSON.stringify(h)}\n${payload}`;
}

interface RemotePending {
  sink: ReplySink;
  node: string;
  timer: NodeJS.Timeout;
}

export class Router {
  private nextRid = 1;
  /** Origin side: requests this node sent to an owner node. */
  private readonly remote = new Map<number, RemotePending>();
  /** Owner side: requests other nodes sent here, by `${from}:${rid}`, for cancellation. */
  private readonly served = new Map<string, () => void>();

  constructor(private readonly ctx: GatewayContext) {
    const bus = ctx.bus;
    bus.onNodeMessage((m) => this.onMessage(m));
    bus.onNodeDown((node) => this.failWhere((p) => p.node === node, relayError('device_offline', 'the relay node holding the phone stopped')));
    bus.onUnavailable(() => this.failWhere(() => true, relayError('relay_unavailable')));
  }

  get remoteInFlight(): number {
    return this.remote.size;
  }

  /**
   * Sends one client request towards the phone. The sink gets exactly one of respond/fail;
   * the returned function cancels (client gone, or its notifications/cancelled).
   */
  async request(deviceId: string, msg: JsonRpcRequest, params: Record<string, unknown> | undefined, caller: Caller, sink: ReplySink, timeoutMs: number): Promise<() => void> {
    const local = this.ctx.hub.device(deviceId);
    if (local && !local.closed) {
      try {
        await local.ready();
      } catch {
        sink.fail(relayError('device_offline', 'the phone did not complete initialize'));
        return () => {};
      }
      return local.handleClientRequest(msg, params, caller, sink, timeoutMs);
    }
    let owner;
    try {
      owner = await this.ctx.bus.ownerOf(deviceId);
    } catch (err) {
      sink.fail(relayError(err instanceof BusUnavailableError ? 'relay_unavailable' : 'relay_error'));
      return () => {};
    }
    if (!owner || owner.nodeId === this.ctx.bus.nodeId) {
      sink.fail(relayError('device_offline'));
      return () => {};
    }
    const rid = this.nextRid++;
    const timer = setTimeout(() => {
      if (this.remote.delete(rid)) sink.fail(relayError('timeout', 'no answer from the node holding the phone'));
    }, timeoutMs + ORIGIN_GRACE_MS);
    this.remote.set(rid, { sink, node: owner.nodeId, timer });
    const header: Header = { t: 'req', from: this.ctx.bus.nodeId, rid, deviceId, id: msg.id, method: msg.method, scopes: [...caller.scopes], timeoutMs };
    const delivered = await this.ctx.bus.sendToNode(owner.nodeId, encode(header, params === undefined ? '' : JSON.stringify(params))).catch(() => false);
    if (!delivered) this.settle(rid)?.sink.fail(relayError('relay_unavailable', 'the node holding the phone is unreachable'));
    const node = owner.nodeId;
    return () => {
      const p = this.settle(rid);
      if (!p) return;
      void this.ctx.bus.sendToNode(node, encode({ t: 'cancel', from: this.ctx.bus.nodeId, rid })).catch(() => {});
      p.sink.fail(relayError('cancelled'));
    };
  }

  /** A client notification for the phone (not answered). */
  async notify(deviceId: string, method: string, params: Record<string, unknown> | undefined): Promise<void> {
    const local = this.ctx.hub.device(deviceId);
    if (local) return local.notify(method, params);
    const owner = await this.ctx.bus.ownerOf(deviceId).catch(() => undefined);
    if (owner && owner.nodeId !== this.ctx.bus.nodeId) {
      await this.ctx.bus.sendToNode(owner.nodeId, encode({ t: 'note', deviceId, method }, params === undefined ? '' : JSON.stringify(params))).catch(() => {});
    }
  }

  private settle(rid: number): RemotePending | undefined {
    const p = this.remote.get(rid);
    if (!p) return undefined;
    clearTimeout(p.timer);
    this.remote.delete(rid);
    return p;
  }

  private failWhere(match: (p: RemotePending) => boolean, error: JsonRpcErrorObject): void {
    for (const [rid, p] of this.remote) if (match(p)) this.settle(rid)?.sink.fail(error);
  }

  private onMessage(raw: string): void {
    const nl = raw.indexOf('\n');
    let h: Header;
    try {
      h = JSON.parse(nl < 0 ? raw : raw.slice(0, nl)) as Header;
    } catch {
      this.ctx.log.warn({ bytes: raw.length }, 'malformed node message');
      return;
    }
    const payload = nl < 0 ? '' : raw.slice(nl + 1);
    switch (h.t) {
      case 'req':
        return void this.serve(h, payload);
      case 'note': {
        const conn = this.ctx.hub.device(h.deviceId);
        if (conn) conn.notify(h.method, payload ? (JSON.parse(payload) as Record<string, unknown>) : undefined);
        return;
      }
      case 'cancel':
        this.served.get(`${h.from}:${h.rid}`)?.();
        return;
      case 'res':
        this.settle(h.rid)?.sink.respond(Buffer.from(payload, 'utf8'));
        return;
      case 'rel':
        this.remote.get(h.rid)?.sink.related?.(Buffer.from(payload, 'utf8'));
        return;
      case 'fail':
        this.settle(h.rid)?.sink.fail(h.error);
        return;
    }
  }

  /** Owner side: run a request for another node and send the answer back to it. */
  private async serve(h: Extract<Header, { t: 'req' }>, payload: string): Promise<void> {
    const key = `${h.from}:${h.rid}`;
    let done = false;
    const reply = (header: Header, body = '') => void this.ctx.bus.sendToNode(h.from, encode(header, body)).catch(() => {});
    const sink: ReplySink = {
      respond: (frame) => {
        done = true;
        this.served.delete(key);
        reply({ t: 'res', rid: h.rid }, frame.toString('utf8'));
      },
      related: (frame) => reply({ t: 'rel', rid: h.rid }, frame.toString('utf8')),
      fail: (error) => {
        done = true;
        this.served.delete(key);
        reply({ t: 'fail', rid: h.rid, error });
      },
    };
    const conn = this.ctx.hub.device(h.deviceId);
    if (!conn || conn.closed) return sink.fail(relayError('device_offline'));
    let params: Record<string, unknown> | undefined;
    try {
      params = payload ? (JSON.parse(payload) as Record<string, unknown>) : undefined;
    } catch {
      return sink.fail(relayError('relay_error', 'malformed forwarded request'));
    }
    try {
      await conn.ready();
    } catch {
      return sink.fail(relayError('device_offline', 'the phone did not complete initialize'));
    }
    const cancel = conn.handleClientRequest({ jsonrpc: '2.0', id: h.id, method: h.method, params }, params, { scopes: h.scopes }, sink, h.timeoutMs);
    // Answers from the cache settle synchronously: nothing left to cancel then.
    if (!done) this.served.set(key, cancel);
  }
}
