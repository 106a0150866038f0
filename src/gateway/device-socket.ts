// Phone sockets: POST /device/challenge, then GET /device/ws with a signature over the
// challenge. Auth failures still upgrade and close at once with 4003 (4004 for a removed
// device's phone) so the phone learns why; success attaches a DeviceConnection, superseding
// any older socket with 4001.
import { Buffer } from 'node:buffer';
import type { HttpRequest, HttpResponse, WebSocket } from '../uws.ts';
import type { WebSocketBehavior, us_socket_context_t } from 'uWebSockets.js';
import { clientAddress, copyHeaders, Exchange, BodyTooLarge } from './http.ts';
import { checkDeviceSignature, decodeNonce, newNonce, signedPayload } from '../crypto/device-auth.ts';
import {
  CLOSE,
  DeviceConnection,
  MAX_BACKPRESSURE_BYTES,
  MAX_FRAME_BYTES,
  type DeviceSocketData,
} from './device-connection.ts';
import {
  countDeviceClose,
  deviceAuthError,
  deviceAuthOk,
  deviceAuthRejected,
  framesTooBig,
  rateLimited,
  receivedFromPhone,
} from '../metrics.ts';
import { LogThrottle, logValue } from '../log.ts';
import type { GatewayContext } from './context.ts';
import { tracingOn } from '../observability/tracing.ts';
import { deviceAuthSpan, endDeviceAuth, traceDisconnect, traceHandshake } from '../observability/relay-spans.ts';

export const NONCE_TTL_S = 60;
export const MAX_SKEW_S = 60;
// Beyond the protocol's limits (which cover only pairing failures): a bound on live nonces per address.
// High enough for a fleet of thousands of phones behind one NAT reconnecting after a restart.
const CHALLENGES_PER_MINUTE = 6000;
/** Rejected upgrades logged per node and window; the rest are counted into the next line. */
export const REJECTED_LOG_LINES = 20;
export const REJECTED_LOG_WINDOW_MS = 10_000;
/** Frames up to this size are read and refused with 1009; beyond it uWS drops the socket (1006). */
const READ_LIMIT = 1024 * 1024;
/** The close message uWS gives a socket it dropped for a frame over maxPayloadLength. */
const UWS_TOO_BIG = 'Received too big message';

/**
 * The codes the relay closes phone sockets with (CLOSE). A phone may close with one of them
 * too (RFC 6455 lets any endpoint send 1001 or 1011): counted under that code, it would read as
 * the relay's doing (docs/decisions/0250-close-codes-count-the-relay-s-closes.md).
 */
const RELAY_CLOSE_CODES: ReadonlySet<number> = new Set(Object.values(CLOSE));
/** Not one of the codes phonebridge_device_closes_total names: counted as `other`. */
const OTHER_CLOSE = 0;

export function handleChallenge(ctx: GatewayContext) {
  return (res: HttpResponse, req: HttpRequest): void => {
    const ex = new Exchange(res);
    const body = ex.body(4 * 1024);
    const ip = clientAddress(res, req, ctx.config);
    void (async () => {
      const raw = await body;
      if ((await ctx.bus.hit(`challenge:${ip}`, 60_000)) > CHALLENGES_PER_MINUTE) {
        rateLimited.challenges.inc();
        return ex.error(429, 'rate_limited', 'too many challenges from this address', { 'Retry-After': '60' });
      }
      let deviceId: unknown;
      try {
        deviceId = (JSON.parse(raw.toString('utf8')) as { device_id?: unknown }).device_id;
      } catch {
        return ex.error(400, 'bad_request', 'body must be JSON {"device_id"}');
      }
      if (typeof deviceId !== 'string' || deviceId.length === 0 || deviceId.length > 128) {
        return ex.error(400, 'bad_request', 'device_id must be a non-empty string');
      }
      // Unknown ids get a nonce too (no oracle); the signature check fails later.
      const nonce = newNonce();
      await ctx.bus.putNonce(nonce.wire, deviceId, NONCE_TTL_S * 1000);
      ex.json(200, { nonce: nonce.wire, expires_in: NONCE_TTL_S });
    })().catch((err) => {
      if (err instanceof BodyTooLarge) return ex.error(413, 'too_large', err.message);
      if (!ex.aborted) ex.error(500, 'relay_error', 'challenge failed on the relay');
    });
  };
}

const WS_HEADERS = [
  'x-device-id',
  'x-device-nonce',
  'x-device-ts',
  'x-device-sig',
  'x-device-app',
  'sec-websocket-key',
  'sec-websocket-protocol',
  'sec-websocket-extensions',
] as const;

/** Checks the five headers; returns the device's account or why it failed (and the close code, if not 4003). */
async function authenticateDevice(
  ctx: GatewayContext,
  h: Record<string, string>,
): Promise<{ ok: true; accountId: string } | { ok: false; reason: string; code?: number }> {
  const deviceId = h['x-device-id'];
  const nonceWire = h['x-device-nonce'];
  const tsRaw = h['x-device-ts'];
  const sig = h['x-device-sig'];
  if (!nonceWire) return { ok: false, reason: 'missing X-Device-* header' };
  const nonce = decodeNonce(nonceWire);
  if (!nonce) return { ok: false, reason: 'malformed nonce' };
  // Single use: taken before anything else is checked, so every failed try burns it, and
  // headers captured from a refused try cannot be sent again.
  const issuedFor = await ctx.bus.takeNonce(nonceWire);
  if (!deviceId || !tsRaw || !sig || !h['x-device-app']) return { ok: false, reason: 'missing X-Device-* header' };
  if (!/^\d{1,12}$/.test(tsRaw)) return { ok: false, reason: 'X-Device-Ts must be Unix seconds' };
  // In whole seconds on both sides: the phone's clock is read as it sends it, floored.
  if (Math.abs(Math.floor(Date.now() / 1000) - Number(tsRaw)) > MAX_SKEW_S)
    return { ok: false, reason: 'clock skew over 60 s' };
  if (issuedFor === undefined) return { ok: false, reason: 'unknown, expired or reused nonce' };
  if (issuedFor !== deviceId) return { ok: false, reason: 'nonce was issued for another device' };
  // Batched with the other accepts of the moment (src/gateway/device-batch.ts); a removed
  // device's key too, kept for this check.
  const device = await ctx.devices.keys.get(deviceId);
  // Verify against our own host from --public-url, never the Host header
  // (docs/decisions/0010-signature-binds-relay-host.md). An unknown id costs the same key
  // import and verification as a known one (0240).
  const verified = await checkDeviceSignature(
    device?.publicKey,
    signedPayload(nonce, ctx.config.relayHost, tsRaw),
    sig,
  );
  if (!device || !verified) return { ok: false, reason: 'bad signature' };
  // Only after the signature verified: a caller without the phone's key hears "bad signature"
  // for a removed id as for one never paired (docs/decisions/0230-removed-devices-are-remembered.md).
  if ('removedAt' in device) return { ok: false, reason: 'device removed', code: CLOSE.removed };
  return { ok: true, accountId: device.accountId };
}

export function deviceSocketBehavior(ctx: GatewayContext): WebSocketBehavior<DeviceSocketData> {
  const rejectedLog = new LogThrottle(REJECTED_LOG_LINES, REJECTED_LOG_WINDOW_MS);
  // One set of callbacks for every connection of this node, not two closures per accept.
  const events = deviceEvents(ctx);
  return {
    maxPayloadLength: READ_LIMIT,
    idleTimeout: 0, // the 25-minute rule is ours (docs/decisions/0012-idle-tracking-beyond-uws.md): uWS caps it at 960 s
    sendPingsAutomatically: false,
    maxBackpressure: MAX_BACKPRESSURE_BYTES,
    closeOnBackpressureLimit: 0,
    compression: 0,

    upgrade: (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => {
      const ex = new Exchange(res);
      const h = copyHeaders(req, WS_HEADERS);
      if (ctx.state.draining)
        return ex.error(503, 'draining', 'this relay node is shutting down', { 'Retry-After': '1' });
      if (!h['sec-websocket-key']) return ex.error(400, 'bad_request', 'expected a WebSocket upgrade');
      const span = tracingOn ? deviceAuthSpan() : undefined;
      void authenticateDevice(ctx, h)
        .catch((err) => {
          // Anyone can cause this line too (an upgrade for any id while the store is down): it is
          // the rejection's one line, under the same throttle as the others below.
          const dropped = rejectedLog.take();
          if (dropped !== undefined)
            ctx.log.error(
              { deviceId: logValue(h['x-device-id']), err: String(err), ...(dropped ? { dropped } : {}) },
              'device auth failed on the relay',
            );
          return { ok: false as const, reason: 'relay error', relayFault: true };
        })
        .then((auth) => {
          if (ex.aborted) return;
          (auth.ok ? deviceAuthOk : 'relayFault' in auth ? deviceAuthError : deviceAuthRejected).inc();
          const data: DeviceSocketData = auth.ok
            ? { deviceId: h['x-device-id'], accountId: auth.accountId }
            : {
                deviceId: logValue(h['x-device-id']) ?? '',
                accountId: '',
                rejectReason: auth.reason,
                rejectCode: 'relayFault' in auth ? CLOSE.relayError : (auth.code ?? CLOSE.unauthorised),
              };
          if (span) data.trace = endDeviceAuth(span, auth.ok, auth.ok ? undefined : auth.reason);
          if (!auth.ok && !('relayFault' in auth)) {
            // Anyone can cause this line: values capped, lines throttled (the metric counts them all).
            // A relay fault wrote its line above, under the same throttle.
            const dropped = rejectedLog.take();
            if (dropped !== undefined)
              ctx.log.info(
                { deviceId: logValue(h['x-device-id']), reason: auth.reason, ...(dropped ? { dropped } : {}) },
                'device socket rejected',
              );
          }
          ex.finished = true;
          res.cork(() =>
            res.upgrade(
              data,
              h['sec-websocket-key'],
              h['sec-websocket-protocol'] ?? '',
              h['sec-websocket-extensions'] ?? '',
              context,
            ),
          );
        });
    },

    open: (ws: WebSocket<DeviceSocketData>) => {
      const data = ws.getUserData();
      if (data.rejectReason) {
        // 4003 tells the phone to stop, 4004 that its device was removed; a fault of ours
        // (database down) is 1011: retry later.
        ws.end(data.rejectCode ?? CLOSE.unauthorised, data.rejectReason.slice(0, 120));
        return;
      }
      // Removed after its key was read (a removal from the CLI or another node lands between
      // the lookup and here): applyControl found no socket to close, so this one is refused now
      // instead of being attached until the journal's copy of the removal arrives.
      if (ctx.hub.isRevoked({ deviceId: data.deviceId })) {
        ws.end(CLOSE.removed, 'device removed');
        return;
      }
      const conn = new DeviceConnection(
        ws,
        data,
        events,
        ctx.log,
        ctx.config.requestTimeoutMs,
        ctx.config.maxInFlight,
        ctx.config.budgets,
      );
      data.conn = conn;
      const old = ctx.hub.attach(conn);
      if (old) old.close(CLOSE.superseded, 'superseded by a newer connection', 'superseded');
      ctx.log.info({ deviceId: conn.deviceId }, 'device connected');
      // Tell the cluster this node holds the phone now; an older socket elsewhere gets 4001.
      conn.claim = ctx.bus.claimDevice(conn.deviceId).then(
        (epoch) => {
          ctx.releases.forget(conn.deviceId); // a release an earlier socket left pending is moot
          return (conn.epoch = epoch);
        },
        (err) => {
          // Local clients still reach the phone; the claim is retried when the bus is back.
          ctx.log.warn({ deviceId: conn.deviceId, err: String(err) }, 'could not claim device on the bus');
          return undefined;
        },
      );
      if (tracingOn) traceHandshake(data.trace, conn.ready());
      conn.ready().catch((err) => {
        ctx.log.warn({ deviceId: conn.deviceId, err: String(err) }, 'device handshake failed');
        conn.close(CLOSE.relayError, 'initialize failed');
      });
      // ready() queued the initialize request: it goes with the 101 (one write, not two).
      conn.writeInOpen();
    },

    message: (ws: WebSocket<DeviceSocketData>, message: ArrayBuffer, isBinary: boolean) => {
      receivedFromPhone(message.byteLength);
      const conn = ws.getUserData().conn;
      if (!conn || conn.closed) return;
      if (message.byteLength > MAX_FRAME_BYTES) {
        framesTooBig.phone.inc();
        // Which request the frame answered is not read from a refused frame: every caller
        // waiting on this phone learns why its phone went away.
        conn.close(
          CLOSE.tooBig,
          'frame exceeds 256 KiB',
          'relay_error',
          'the phone sent a frame over the 256 KiB limit and was disconnected (1009)',
        );
        return;
      }
      if (isBinary) {
        conn.close(CLOSE.unsupportedData, 'text frames only');
        return;
      }
      // A view of uWS's memory, valid during this callback only: onFrame copies what it keeps
      // (an answer once, as it puts the client's id back), so a 256 KiB answer is copied once.
      conn.onFrame(Buffer.from(message));
    },

    ping: (ws: WebSocket<DeviceSocketData>) => {
      const conn = ws.getUserData().conn;
      if (conn) conn.lastFrameAt = Date.now();
    },
    pong: (ws: WebSocket<DeviceSocketData>) => {
      const conn = ws.getUserData().conn;
      if (conn) conn.lastFrameAt = Date.now();
    },

    close: (ws: WebSocket<DeviceSocketData>, code: number, message: ArrayBuffer) => {
      const conn = ws.getUserData().conn;
      // The relay closed it: a refused upgrade (no connection) or conn.close, which marks it
      // closed before ending the socket. Otherwise the phone closed it, or it dropped (1006).
      const byRelay = !conn || conn.closed;
      countDeviceClose(byRelay || !RELAY_CLOSE_CODES.has(code) ? code : OTHER_CLOSE);
      if (!conn) return;
      if (tracingOn) traceDisconnect(ws.getUserData().trace, code, conn.connectedAt);
      // A frame past READ_LIMIT never reaches `message`: uWS drops the socket with 1006 and
      // this text. Its callers hear the same cause as for a 1009, not that the phone left.
      if (code === 1006 && !conn.closed && Buffer.from(message).toString('latin1') === UWS_TOO_BIG) {
        framesTooBig.phone.inc();
        conn.teardown('relay_error', 'the phone sent a frame over the 256 KiB limit and was disconnected (1006)');
      } else conn.teardown('device_offline');
      ctx.hub.detach(conn);
      // Compare-and-delete: a newer claim (the phone back on another node) is not touched.
      void ctx.releases.releaseHeld(conn).catch(() => {});
      // `closeCode`, not `code`: the logger removes any `code` field (pairing and authorization
      // codes, src/log.ts).
      ctx.log.info({ deviceId: conn.deviceId, closeCode: code }, 'device disconnected');
      ctx.devices.seen.seen(conn.deviceId, new Date());
    },
  };
}

function deviceEvents(ctx: GatewayContext) {
  return {
    notification: (deviceId: string, frame: Buffer) => {
      ctx.hub.publish(deviceId, frame);
    },
    initialized: (deviceId: string, result: unknown) => ctx.devices.seen.seen(deviceId, new Date(), result),
  };
}

/** Closes sockets silent for longer than the idle limit (pings count as traffic). */
export function sweepIdleDevices(ctx: GatewayContext, now = Date.now()): number {
  let closed = 0;
  for (const conn of ctx.hub.connections()) {
    if (now - conn.lastFrameAt > ctx.config.deviceIdleMs) {
      conn.close(CLOSE.idle, 'no traffic for too long');
      closed++;
    }
  }
  return closed;
}
