// The reference phone's connection to the relay: challenge → sign → upgrade → serve MCP over the
// socket → on close, stop or reconnect according to the close code. A fresh MCP server is created
// per socket because the relay sends initialize once per socket.
import process from 'node:process';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type { KeyObject } from 'node:crypto';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import WebSocket from 'ws';
import { decodeNonce, signDevicePayload, signedPayload } from '../../crypto/device-auth.ts';
import { Backoff, type BackoffOptions } from './backoff.ts';
import { pairDevice, type PairOptions } from './pairing.ts';
import { Pinger, type PingOptions } from './pinger.ts';
import { connectPinned, deviceSocketUrl, pinFor, postJson, relayUrl, type FetchLike } from './relay-http.ts';
import { loadIdentity, loadPrivateKeyFrom, saveIdentity, type DeviceIdentity } from './state.ts';
import { MAX_FRAME_BYTES, WebSocketTransport } from './ws-transport.ts';
import { phoneTracingFromEnv, tracedTransport } from './tracing.ts';
import type { Tracing } from '../../observability/tracing.ts';

export const AGENT_VERSION = '0.1.0';

/** An SDK McpServer or Server, or anything else that can serve over a Transport. */
export interface McpServerLike {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}

/** Satisfied by console and by a pino logger. */
export interface AgentLogger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export const stderrLogger: AgentLogger = {
  info: (msg) => process.stderr.write(`phonebridge-agent: ${msg}\n`),
  warn: (msg) => process.stderr.write(`phonebridge-agent: warning: ${msg}\n`),
  error: (msg) => process.stderr.write(`phonebridge-agent: error: ${msg}\n`),
};

export const silentLogger: AgentLogger = { info() {}, warn() {}, error() {} };

export interface DeviceAgentOptions {
  stateDir: string;
  /** Called once per socket. */
  createServer: () => McpServerLike;
  /** Sent as X-Device-App: phonebridge-agent/<appVersion>. */
  appVersion?: string;
  backoff?: BackoffOptions;
  pingIntervals?: PingOptions;
  /** After 1012 (relay draining) reconnect within [0, drainJitterMs]. Default 1 000. */
  drainJitterMs?: number;
  /** Consecutive 401/403 upgrade rejections before giving up. Default 5. */
  maxAuthRejections?: number;
  /** Timeout of the challenge POST and of the WebSocket handshake. Default 15 000. */
  requestTimeoutMs?: number;
  fetchImpl?: FetchLike;
  log?: AgentLogger;
  /** Traces each tools/call the phone serves (src/device/agent/tracing.ts); runDevice sets it from OTEL_*. */
  tracing?: Tracing;
}

export type StopReason = 'stopped' | 'superseded' | 'unauthorised' | 'removed';

export interface StopInfo {
  reason: StopReason;
  /** The relay's close code, or the upgrade's HTTP status for repeated rejections. */
  code?: number;
  message: string;
}

export interface ConnectedEvent {
  deviceId: string;
  url: string;
}

export interface DisconnectedEvent {
  code: number;
  reason: string;
  uptimeMs: number;
  willReconnect: boolean;
}

export interface ReconnectingEvent {
  delayMs: number;
  /** Why the last attempt ended: a close code or a connection failure. */
  cause: string;
}

export interface DeviceAgentEvents {
  connected: [ConnectedEvent];
  disconnected: [DisconnectedEvent];
  reconnecting: [ReconnectingEvent];
  stopped: [StopInfo];
}

type Attempt =
  | { kind: 'failed'; cause: string; /** HTTP status of a refused upgrade */ status?: number }
  | { kind: 'closed'; code: number; reason: string; uptimeMs: number };

/**
 * How long stop() waits for the relay to answer its close frame before it drops the socket
 * (terminate()): a round trip on any live path, far below ws's own 30 s.
 */
const STOP_CLOSE_GRACE_MS = 1_000;

/** Close codes after which reconnecting is wrong: someone has to act first. */
const FINAL_CLOSES: Record<number, { reason: StopReason; explain: string }> = {
  4001: {
    reason: 'superseded',
    explain: 'another instance of this device connected and took over; this one stops (run one agent per state dir)',
  },
  4003: { reason: 'unauthorised', explain: 'the relay refused this device as unauthorised' },
  4004: {
    reason: 'removed',
    explain: 'the device was removed from the relay and its pairing is gone; pair again with a new code',
  },
};

export class DeviceAgent extends EventEmitter<DeviceAgentEvents> {
  /** Pairs the state dir with a relay (once); the key stays in the state dir. */
  static pair(opts: PairOptions): Promise<DeviceIdentity> {
    return pairDevice(opts);
  }

  readonly backoff: Backoff;
  readonly pinger: Pinger;
  private readonly log: AgentLogger;
  private identity: DeviceIdentity | undefined;
  private key: KeyObject | undefined;
  private loop: Promise<StopInfo> | undefined;
  private lastRun: Promise<StopInfo> | undefined;
  private stopRequested = false;
  private abort = new AbortController();
  private socket: WebSocket | undefined;
  private wake: (() => void) | undefined;
  private authRejections = 0;

  constructor(private readonly options: DeviceAgentOptions) {
    super();
    this.log = options.log ?? stderrLogger;
    this.backoff = new Backoff(options.backoff);
    this.pinger = new Pinger(options.pingIntervals, (ms) =>
      this.log.warn(`no pong within ${ms} ms; the connection is dead, reconnecting`),
    );
  }

  get connected(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  get deviceId(): string | undefined {
    return this.identity?.device_id;
  }

  /** Starts the connect loop in the background. Throws at once if the state dir is not paired. */
  start(): void {
    if (this.loop) return;
    const identity = loadIdentity(this.options.stateDir);
    if (!identity)
      throw new Error(`${this.options.stateDir} is not paired; pair first (phonebridge device run --pair '<QR JSON>')`);
    if (identity.removed_at)
      throw new Error(
        `device ${identity.device_id} was removed from the relay on ${identity.removed_at}; pair again with a new code`,
      );
    if (identity.fp && !pinFor(identity.relay, identity.fp))
      this.log.warn(`the stored pin is ignored: ${identity.relay} is not https`);
    this.identity = identity;
    this.key = loadPrivateKeyFrom(this.options.stateDir);
    this.stopRequested = false;
    this.authRejections = 0;
    this.abort = new AbortController();
    this.loop = this.lastRun = this.run();
  }

  /**
   * Closes the socket (1000) and ends the loop; resolves once stopped, within STOP_CLOSE_GRACE_MS
   * of the call when the relay does not answer the close.
   */
  async stop(): Promise<void> {
    if (!this.loop) return;
    this.stopRequested = true;
    this.abort.abort();
    this.wake?.();
    const socket = this.socket;
    socket?.close(1000, 'device stopping');
    // ws waits 30 s for the relay's close frame before it gives up; on a dead path (a NAT that
    // forgot the flow, a frozen relay) none comes, and the loop waits for the socket's 'close'.
    // A live relay answers within a round trip, so after a short grace the socket is dropped
    // without it, as WebSocketTransport.close() does not wait for the closing handshake either.
    const grace = socket && setTimeout(() => socket.terminate(), STOP_CLOSE_GRACE_MS);
    try {
      await this.loop;
    } finally {
      clearTimeout(grace);
    }
  }

  /** Resolves when the agent stops, for good or by stop(). */
  whenStopped(): Promise<StopInfo> {
    return this.lastRun ?? Promise.reject(new Error('agent not started'));
  }

  private async run(): Promise<StopInfo> {
    let stop: StopInfo | undefined;
    while (!stop) {
      const attempt = await this.attempt().catch((err: Error): Attempt => ({
        kind: 'failed',
        cause: `connection failed: ${describe(err)}`,
      }));
      const next = this.stopRequested
        ? { reason: 'stopped' as const, message: 'stopped on request' }
        : this.decide(attempt);
      if ('reason' in next) {
        stop = next;
        break;
      }
      this.log.info(`${next.cause}; reconnecting in ${next.delayMs} ms`);
      this.emit('reconnecting', next);
      await this.sleep(next.delayMs);
      if (this.stopRequested) stop = { reason: 'stopped', message: 'stopped on request' };
    }
    if (stop.reason === 'removed' && this.identity) {
      saveIdentity(this.options.stateDir, { ...this.identity, removed_at: new Date().toISOString() });
    }
    if (stop.reason === 'stopped') this.log.info(`stopped: ${stop.message}`);
    else this.log.error(`stopped: ${stop.message}`);
    this.loop = undefined;
    this.socket = undefined;
    this.emit('stopped', stop);
    return stop;
  }

  /** Stop for good, or how long to wait before the next attempt. */
  private decide(attempt: Attempt): StopInfo | ReconnectingEvent {
    if (attempt.kind === 'closed') {
      const final = FINAL_CLOSES[attempt.code];
      this.emit('disconnected', {
        code: attempt.code,
        reason: attempt.reason,
        uptimeMs: attempt.uptimeMs,
        willReconnect: !final,
      });
      const detail = `${attempt.code}${attempt.reason ? ` (${attempt.reason})` : ''}`;
      if (final) return { reason: final.reason, code: attempt.code, message: `${final.explain}; close ${detail}` };
      this.backoff.dropped();
      // 1012: this node is draining and the load balancer has others, so come back promptly.
      const delayMs =
        attempt.code === 1012 ? this.backoff.jitter(this.options.drainJitterMs ?? 1_000) : this.backoff.next();
      return { delayMs, cause: `close ${detail}` };
    }
    if (attempt.status === 401 || attempt.status === 403) {
      const limit = this.options.maxAuthRejections ?? 5;
      if (++this.authRejections >= limit) {
        const message = `the relay rejected this device's signature ${limit} times in a row (HTTP ${attempt.status}): the device may have been removed while offline, or this clock is more than 60 s off`;
        return { reason: 'unauthorised', code: attempt.status, message };
      }
    }
    return { delayMs: this.backoff.next(), cause: attempt.cause };
  }

  /** One connection, from challenge to close. */
  private async attempt(): Promise<Attempt> {
    const identity = this.identity!;
    const timeoutMs = this.options.requestTimeoutMs ?? 15_000;
    let nonceWire: string;
    try {
      const reply = await postJson(
        relayUrl(identity.relay, '/device/challenge'),
        { device_id: identity.device_id },
        {
          fp: identity.fp,
          fetchImpl: this.options.fetchImpl,
          timeoutMs,
          signal: this.abort.signal,
        },
      );
      if (reply.status !== 200 || typeof reply.body?.nonce !== 'string')
        return { kind: 'failed', cause: `challenge failed (HTTP ${reply.status})` };
      nonceWire = reply.body.nonce;
    } catch (err) {
      return { kind: 'failed', cause: `challenge failed: ${describe(err as Error)}` };
    }
    const nonce = decodeNonce(nonceWire);
    if (!nonce) return { kind: 'failed', cause: 'challenge failed: the relay sent a malformed nonce' };
    if (this.stopRequested) return { kind: 'failed', cause: 'stopping' };

    const ts = Math.floor(Date.now() / 1000);
    const url = deviceSocketUrl(identity.relay);
    const pin = pinFor(identity.relay, identity.fp);
    let socket: WebSocket;
    try {
      const pinned = pin ? await connectPinned(new URL(url), pin, timeoutMs) : undefined;
      if (this.stopRequested) {
        pinned?.destroy();
        return { kind: 'failed', cause: 'stopping' };
      }
      socket = new WebSocket(url, {
        headers: {
          'X-Device-Id': identity.device_id,
          'X-Device-Nonce': nonceWire,
          'X-Device-Ts': String(ts),
          'X-Device-Sig': signDevicePayload(this.key!, signedPayload(nonce, identity.relay_host, ts)),
          'X-Device-App': `phonebridge-agent/${this.options.appVersion ?? AGENT_VERSION}`,
        },
        handshakeTimeout: timeoutMs,
        maxPayload: MAX_FRAME_BYTES,
        perMessageDeflate: false, // frames are small JSON, and zlib state per socket costs a fleet dearly
        ...(pinned ? { createConnection: () => pinned } : {}),
      });
    } catch (err) {
      return { kind: 'failed', cause: `connect failed: ${describe(err as Error)}` };
    }
    this.socket = socket;
    // Listeners go on before anything can arrive: the relay sends initialize right after the upgrade.
    const transport = new WebSocketTransport(socket, { log: this.log });
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      socket.once('close', (code, reason) =>
        resolve({ code, reason: reason.toString() || (code === 1006 ? 'connection lost' : '') }),
      ),
    );
    const opened = await new Promise<Attempt | undefined>((resolve) => {
      socket.once('open', () => resolve(undefined));
      socket.once('unexpected-response', (_req, res) => {
        resolve({ kind: 'failed', cause: `upgrade refused (HTTP ${res.statusCode})`, status: res.statusCode });
      });
      socket.on('error', (err) => resolve({ kind: 'failed', cause: `connect failed: ${err.message}` }));
      socket.once('close', () => resolve({ kind: 'failed', cause: 'connect failed: closed during the handshake' }));
    });
    if (opened) {
      socket.terminate();
      return opened;
    }

    const connectedAt = Date.now();
    this.backoff.connected();
    this.authRejections = 0;
    const stopPinging = this.pinger.attach(socket);
    let server: McpServerLike | undefined;
    transport.onerror = (err) => this.log.warn(err.message); // the SDK chains its own handler after this one
    try {
      server = this.options.createServer();
      await server.connect(this.options.tracing ? tracedTransport(transport, this.options.tracing) : transport);
      this.log.info(`connected to ${url} as device ${identity.device_id}`);
      this.emit('connected', { deviceId: identity.device_id, url });
    } catch (err) {
      this.log.error(`the MCP server failed to start: ${(err as Error).message}`);
      socket.close(1011, 'device server failed');
    }
    const { code, reason } = await closed;
    stopPinging();
    await server?.close().catch(() => {});
    return { kind: 'closed', code, reason, uptimeMs: Date.now() - connectedAt };
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopRequested) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }
}

/** An error's message plus its cause's, since fetch reports only "fetch failed" on its own. */
function describe(err: Error): string {
  const cause = err.cause as { code?: string; message?: string } | undefined;
  return cause ? `${err.message} (${cause.code ?? cause.message})` : err.message;
}

export interface RunDeviceOptions extends Omit<DeviceAgentOptions, 'stateDir'> {
  stateDir: string;
  /** The QR payload JSON; used only if the state dir is not paired yet. */
  pair?: string;
  /** Device name for pairing. Default: this host's name. */
  name?: string;
  /** Aborting it stops the agent (the CLI wires SIGINT/SIGTERM to it). */
  signal?: AbortSignal;
  /** Handed the agent once it exists, for callers that want its events. */
  onAgent?: (agent: DeviceAgent) => void;
}

/** `phonebridge device run`: pairs if needed, then stays connected; resolves when the agent stops. */
export async function runDevice(opts: RunDeviceOptions): Promise<StopInfo> {
  const log = opts.log ?? stderrLogger;
  const existing = loadIdentity(opts.stateDir);
  if (!existing || existing.removed_at) {
    if (!opts.pair) {
      throw new Error(
        existing
          ? `device ${existing.device_id} was removed from the relay; pair again with --pair '<QR JSON>'`
          : `${opts.stateDir} is not paired; pass --pair '<QR JSON>' (from phonebridge pair --json)`,
      );
    }
    const identity = await DeviceAgent.pair({
      stateDir: opts.stateDir,
      qr: opts.pair,
      name: opts.name ?? hostname(),
      fetchImpl: opts.fetchImpl,
      log,
    });
    log.info(`paired with ${identity.relay} as device ${identity.device_id}`);
  } else if (opts.pair) {
    log.info(`already paired as device ${existing.device_id} with ${existing.relay}; --pair ignored`);
  }
  const deviceId = loadIdentity(opts.stateDir)?.device_id ?? 'unpaired';
  const tracing = opts.tracing ?? phoneTracingFromEnv(deviceId);
  const agent = new DeviceAgent({ ...opts, log, tracing });
  opts.onAgent?.(agent);
  agent.start();
  if (opts.signal?.aborted) void agent.stop();
  else opts.signal?.addEventListener('abort', () => void agent.stop(), { once: true });
  const stop = await agent.whenStopped();
  await tracing?.shutdown().catch(() => {});
  return stop;
}
