// One phone socket's protocol, seen from the relay: the relay is the MCP client towards the
// phone (initialize once per socket), every forwarded request gets a relay-unique id, and
// the phone's answers go back to whoever asked with the client's id restored.
import type { WebSocket } from '../uws.ts';
import { inspectPhoneFrame, withId } from '../protocol/frame.ts';
import { classify, errorResponse, resultResponse, type JsonRpcId } from '../protocol/jsonrpc.ts';
import { METHOD_NOT_FOUND, relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import { LATEST_SESSION_REVISION } from '../protocol/revisions.ts';
import type { Logger } from '../log.ts';
import { metrics } from '../metrics.ts';

export const MAX_FRAME_BYTES = 256 * 1024;

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
  /** A message about this request that travels before its response (progress, logs). */
  related?(frame: Buffer): void;
  fail(error: JsonRpcErrorObject): void;
}

interface Pending {
  clientId: JsonRpcId;
  sink: ReplySink;
  timer: NodeJS.Timeout;
  method: string;
}

export interface DeviceSocketData {
  deviceId: string;
  accountId: string;
  /** Set when auth failed: the socket is closed with 4003 as soon as it opens. */
  rejectReason?: string;
  conn?: DeviceConnection;
}

export interface DeviceConnectionEvents {
  /** A phone notification for every listening stream of this device. */
  notification(deviceId: string, frame: Buffer): void;
  initialized(deviceId: string, result: unknown): void;
}

export class DeviceConnection {
  readonly deviceId: string;
  readonly accountId: string;
  readonly connectedAt = Date.now();
  lastFrameAt = Date.now();
  initResult: unknown;
  closed = false;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private handshakeDone?: Promise<void>;

  constructor(
    private readonly ws: WebSocket<DeviceSocketData>,
    data: DeviceSocketData,
    private readonly events: DeviceConnectionEvents,
    private readonly log: Logger,
  ) {
    this.deviceId = data.deviceId;
    this.accountId = data.accountId;
  }

  get inFlight(): number {
    return this.pending.size;
  }

  /** initialize + notifications/initialized, once per socket; the result is cached by the caller. */
  handshake(timeoutMs: number): Promise<void> {
    this.handshakeDone ??= new Promise<void>((resolve, reject) => {
      this.forward(
        { method: 'initialize', params: { protocolVersion: LATEST_SESSION_REVISION, capabilities: {}, clientInfo: { name: 'phonebridge-relay', version: '0.1.0' } } },
        'relay-init',
        {
          respond: (frame) => {
            const parsed = JSON.parse(frame.toString('utf8')) as { result?: unknown; error?: JsonRpcErrorObject };
            if (!parsed.result) return reject(new Error(`phone refused initialize: ${parsed.error?.message ?? 'no result'}`));
            this.initResult = parsed.result;
            this.sendFrame(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
            this.events.initialized(this.deviceId, parsed.result);
            resolve();
          },
          fail: (e) => reject(new Error(e.message)),
        },
        timeoutMs,
      );
    });
    return this.handshakeDone;
  }

  /**
   * Sends a request to the phone under a fresh relay id. The sink gets exactly one of
   * respond/fail. Returns a cancel function (client gone): it drops the pending entry and
   * tells the phone with notifications/cancelled.
   */
  forward(msg: { method: string; params?: Record<string, unknown> }, clientId: JsonRpcId, sink: ReplySink, timeoutMs: number): () => void {
    if (this.closed) {
      sink.fail(relayError('device_offline'));
      return () => {};
    }
    const relayId = this.nextId++;
    const frame = JSON.stringify({ jsonrpc: '2.0', id: relayId, method: msg.method, params: msg.params });
    if (Buffer.byteLength(frame) > MAX_FRAME_BYTES) {
      sink.fail(relayError('too_large'));
      return () => {};
    }
    const timer = setTimeout(() => {
      if (this.pending.delete(relayId)) {
        this.sendCancelled(relayId, 'timeout');
        sink.fail(relayError('timeout', `no answer within ${Math.round(timeoutMs / 1000)} s`));
      }
    }, timeoutMs);
    this.pending.set(relayId, { clientId, sink, timer, method: msg.method });
    if (!this.sendFrame(frame)) {
      this.settle(relayId);
      sink.fail(relayError('relay_error', 'phone socket is saturated'));
      return () => {};
    }
    return () => {
      if (!this.settle(relayId)) return;
      this.sendCancelled(relayId, 'cancelled by the client');
      sink.fail(relayError('cancelled'));
    };
  }

  /** Fire-and-forget notification to the phone (client notifications, cancellations). */
  notify(method: string, params?: Record<string, unknown>): void {
    this.sendFrame(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  private sendCancelled(relayId: number, reason: string): void {
    this.notify('notifications/cancelled', { requestId: relayId, reason });
  }

  private settle(relayId: number): Pending | undefined {
    const p = this.pending.get(relayId);
    if (!p) return undefined;
    clearTimeout(p.timer);
    this.pending.delete(relayId);
    return p;
  }

  sendFrame(frame: string): boolean {
    if (this.closed) return false;
    let status = 0;
    this.ws.cork(() => {
      status = this.ws.send(frame, false, false);
    });
    metrics.deviceFrames.inc({ direction: 'to_device' });
    // 0 = buffered (drains later), 1 = sent, 2 = dropped by the backpressure limit.
    return status !== 2;
  }

  /** One text frame from the phone (its own copy of the bytes). */
  onFrame(text: Buffer): void {
    this.lastFrameAt = Date.now();
    metrics.deviceFrames.inc({ direction: 'from_device' });
    const f = inspectPhoneFrame(text);
    if (f.kind === 'response') {
      const p = typeof f.id === 'number' ? this.settle(f.id) : undefined;
      // Unknown ids are late answers to cancelled or timed-out requests: dropped by design.
      if (p) p.sink.respond(withId(text, f.idStart, f.idEnd, p.clientId));
      return;
    }
    if (f.kind === 'invalid') {
      this.log.warn({ deviceId: this.deviceId, reason: f.reason, bytes: text.length }, 'invalid frame from phone');
      return;
    }
    const c = classify(f.value);
    if (c.kind === 'request') {
      // The relay never forwards phone-originated requests; it answers ping itself.
      if (c.msg.method === 'ping') this.sendFrame(resultResponse(c.msg.id, {}));
      else this.sendFrame(errorResponse(c.msg.id, { code: METHOD_NOT_FOUND, message: `Method not found: the relay does not forward ${c.msg.method} to clients` }));
      return;
    }
    if (c.kind === 'notification') {
      this.events.notification(this.deviceId, text);
      return;
    }
    this.log.warn({ deviceId: this.deviceId, bytes: text.length }, 'unexpected frame from phone');
  }

  /** Fails everything in flight; the socket itself is closed by the caller or already gone. */
  teardown(reason: 'device_offline' | 'device_removed' | 'superseded' | 'relay_error'): void {
    if (this.closed) return;
    this.closed = true;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.sink.fail(relayError(reason));
    }
  }

  /** Closes the socket with a code; safe to call more than once. */
  close(code: number, reason: string, failWith: 'device_offline' | 'device_removed' | 'superseded' | 'relay_error' = 'device_offline'): void {
    if (this.closed) return;
    this.teardown(failWith);
    try {
      this.ws.end(code, reason);
    } catch {
      // already closed by the peer
    }
  }
}
