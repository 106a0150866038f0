// A gateway node: one uWS app for clients and phones, one for the admin port, the shared
// bus and store behind them, and the control plane (invalidation, idle sweep, drain).
import { readFileSync } from 'node:fs';
import { createHash, X509Certificate } from 'node:crypto';
import {
  listenExclusive,
  uws,
  type HttpRequest,
  type HttpResponse,
  type TemplatedApp,
  type us_listen_socket,
} from '../uws.ts';
import type { RelayConfig } from '../config.ts';
import type { Store } from '../store/types.ts';
import type { Bus, ControlEvent } from '../bus/types.ts';
import { CREDENTIAL_REVOKED_METHOD } from '../protocol/caller.ts';
import type { Logger } from '../log.ts';
import { registry, routeMetrics, trackNode, type RouteMetrics } from '../metrics.ts';
import { tracingOn } from '../observability/tracing.ts';
import { OPENMETRICS_CONTENT_TYPE, renderOpenMetrics, wantsOpenMetrics } from '../observability/openmetrics.ts';
import { Hub } from './hub.ts';
import { Authenticator } from './auth.ts';
import { DeviceKeyLookup, DeviceSeenWriter } from './device-batch.ts';
import { DeviceReleases } from './device-releases.ts';
import { Exchange, methodNotAllowed, runRoute } from './http.ts';
import { handlePair } from './pairing.ts';
import { deviceSocketBehavior, handleChallenge, sweepIdleDevices } from './device-socket.ts';
import { registerMcpRoutes } from './mcp-endpoint.ts';
import { registerLocalAuthHelp } from './unauthorized.ts';
import { CLOSE, type DeviceConnection } from './device-connection.ts';
import { Router } from './router.ts';
import type { GatewayContext } from './context.ts';
import type { GatewayFeature, StartedFeature } from './features.ts';
import { ListenError } from './listen-error.ts';

export interface GatewayNode {
  ctx: GatewayContext;
  port: number;
  adminPort: number;
  /** sha256:<hex> of the TLS leaf's SPKI when the relay terminates TLS. */
  fingerprint?: string;
  /** Announces and applies an invalidation on every node. */
  control(event: ControlEvent): Promise<void>;
  drain(): Promise<void>;
  close(): Promise<void>;
}

export async function startGateway(opts: {
  config: RelayConfig;
  store: Store;
  bus: Bus;
  log: Logger;
  /** Optional features, started in order with the node's routes (src/gateway/features.ts). */
  features?: readonly GatewayFeature[];
}): Promise<GatewayNode> {
  const { config, store, bus, log } = opts;
  const hub = new Hub(bus);
  // The pin QR payloads carry (docs/PROTOCOL.md "Pairing"), whoever makes them: the CLI reads it
  // from the data dir, /api/v1 and the dashboard from here.
  const fingerprint =
    config.tlsCert && config.tlsKey ? spkiFingerprint(readFileSync(config.tlsCert, 'utf8')) : undefined;
  const ctx = {
    config,
    store,
    bus,
    hub,
    // While the journal cannot be read, known keys are answered from the cache at once.
    auth: new Authenticator(store, { storeUp: () => journal.storeUp }),
    devices: { keys: new DeviceKeyLookup(store), seen: new DeviceSeenWriter(store, log) },
    releases: new DeviceReleases(bus, log),
    log,
    state: { draining: false },
    fingerprint,
  } as GatewayContext;
  ctx.router = new Router(ctx);

  bus.onControl((event) => applyControl(ctx, event));
  bus.onSuperseded((deviceId, epoch) => void supersede(ctx, deviceId, epoch));
  bus.onReconnected(() => void reclaimAll(ctx));
  const journal = tailControlJournal(ctx, config.controlPollMs);
  const untrack = trackNode({
    pending: () => ctx.router.inFlight,
    onPhones: () => {
      let n = 0;
      for (const c of hub.connections()) n += c.inFlight;
      return n;
    },
    draining: () => ctx.state.draining,
    storeUp: () => journal.storeUp,
    redisUp: () => (bus.kind === 'redis' ? bus.available : undefined),
  });

  let app: TemplatedApp;
  if (config.tlsCert && config.tlsKey) {
    app = uws.SSLApp({ cert_file_name: config.tlsCert, key_file_name: config.tlsKey });
  } else {
    app = uws.App();
  }
  const traffic = { lastRequestAt: 0 };
  const routes = closingWhileDraining(app, ctx.state, traffic);
  routes.post('/pair', handlePair(ctx));
  routes.post('/device/challenge', handleChallenge(ctx));
  app.ws('/device/ws', deviceSocketBehavior(ctx));
  const mcp = registerMcpRoutes(routes, ctx);
  const started: StartedFeature[] = [];
  for (const f of opts.features ?? []) {
    const s = f.start({ app: routes, ctx, mcp });
    if (s) started.push(s);
  }
  // No feature serves OAuth for /mcp: clients that go looking are told how to authenticate.
  if (!mcp.oauthOffered) registerLocalAuthHelp(routes);
  routes.any('/*', (res) => new Exchange(res).error(404, 'not_found', 'no such endpoint'));

  const admin = uws.App();
  /** An admin endpoint: GET, HEAD (the same answer without its body), and 405 for other methods. */
  const adminRoute = (path: string, answer: (ex: Exchange, req: HttpRequest) => void) => {
    admin.get(path, (res, req) => answer(new Exchange(res), req));
    admin.head(path, (res, req) => answer(new Exchange(res, { head: true }), req));
    admin.any(path, methodNotAllowed(['GET', 'HEAD']));
  };
  adminRoute('/metrics', (ex, req) => {
    // With tracing on, a scraper that asks for OpenMetrics gets the exemplars (trace ids) too.
    const openMetrics = tracingOn && wantsOpenMetrics(req.getHeader('accept'));
    (openMetrics ? renderOpenMetrics(registry) : registry.metrics()).then(
      (text) => ex.send(200, { 'Content-Type': openMetrics ? OPENMETRICS_CONTENT_TYPE : registry.contentType }, text),
      () => ex.send(500, {}, 'metrics failed'),
    );
  });
  adminRoute('/healthz', (ex) => ex.json(200, { status: 'ok', node: config.nodeId }));
  adminRoute('/readyz', (ex) => {
    if (ctx.state.draining) return ex.json(503, { status: 'draining' });
    // Ready whatever the store and Redis do: this node still serves what needs neither, and
    // pulling every pod at once on a store blip would turn a partial outage into a full one.
    // The body says how each is doing (docs/decisions/0205-readyz-reports-dependencies.md).
    ex.json(200, {
      status: 'ready',
      devices: hub.deviceCount,
      store: { up: journal.storeUp, last_read_ms: journal.lastReadMs },
      ...(bus.kind === 'local' ? {} : { redis: { up: bus.available, heartbeat_ms: bus.lastRoundTripMs } }),
    });
  });
  admin.any('/*', (res, req) =>
    new Exchange(res, { head: req.getMethod() === 'head' }).error(
      404,
      'not_found',
      'admin endpoints: /metrics /healthz /readyz',
    ),
  );

  let listenSocket: us_listen_socket;
  let adminSocket: us_listen_socket;
  try {
    listenSocket = await listen(app, config.host, config.port, '--port');
    adminSocket = await listen(admin, config.adminHost, config.adminPort, '--admin-port').catch((err) => {
      uws.us_listen_socket_close(listenSocket);
      throw err;
    });
  } catch (err) {
    journal.stop();
    untrack();
    ctx.router.close();
    for (const s of started) await s.close();
    throw err;
  }
  const port = uws.us_socket_local_port(listenSocket);
  const adminPort = uws.us_socket_local_port(adminSocket);
  if (!config.publicUrlExplicit && config.port === 0) {
    // An ephemeral port (tests): the derived public URL names the port actually bound.
    const u = new URL(config.publicUrl);
    u.port = String(port);
    config.publicUrl = u.origin;
    config.relayHost = u.host;
  }

  const sweepEvery = Math.max(1000, Math.min(60_000, Math.floor(config.deviceIdleMs / 4)));
  const sweeper = setInterval(() => sweepIdleDevices(ctx), sweepEvery);
  sweeper.unref();
  const purger = setInterval(() => void store.purgeExpired(new Date()).catch(() => {}), 10 * 60_000);
  purger.unref();

  log.info({ port, adminPort, publicUrl: config.publicUrl, node: config.nodeId, bus: bus.kind }, 'relay listening');

  let closed = false;
  let draining: Promise<void> | undefined;
  /** When a drain's --drain-ms ends: close() finishes its own work by then too. */
  let drainDeadline: number | undefined;

  /** Whether a phone closed here has another node to go to (else handing it over is pointless). */
  async function othersAlive(): Promise<boolean> {
    if (bus.kind === 'local') return false;
    const alive = await bus.aliveNodes().catch(() => [] as string[]);
    return alive.some((n) => n !== bus.nodeId);
  }

  /**
   * SIGTERM: readiness fails and no new connection is accepted; each phone is handed over —
   * no new request starts on its socket (origins hold them, see router.ts), and once the
   * requests running on it are done (or at the deadline) it is closed with 1012 so it
   * reconnects elsewhere through the load balancer. Then the requests this node's own clients
   * sent finish (their phones now elsewhere). GET streams are closed at the start, so their
   * clients reconnect elsewhere, but keep buffering here for their resumption until the node
   * exits (docs/decisions/0246-get-stream-handover.md).
   * The last node of a cluster (or a single node) has nowhere to hand phones to: it keeps
   * serving them until nothing is in flight, then closes them.
   */
  async function drainNode(): Promise<void> {
    ctx.state.draining = true;
    uws.us_listen_socket_close(listenSocket);
    // GET streams are closed now, so their clients reconnect elsewhere (`retry`), but what
    // arrives until then is still buffered here for their resumption, until the node exits
    // (a stand-in, dropped when the stream goes live on another node: docs/decisions/0246-get-stream-handover.md).
    disconnectStreams();
    const deadline = (drainDeadline = Date.now() + config.drainMs);
    const handOver = await othersAlive();
    if (!handOver) {
      while (Date.now() < deadline && [...hub.connections()].some((c) => c.inFlight > 0)) await sleep(20);
      for (const conn of [...hub.connections()]) conn.close(CLOSE.restarting, 'relay restarting; reconnect');
    }
    const seen = new Set<DeviceConnection>();
    const pending = new Set<DeviceConnection>();
    for (;;) {
      // Sockets that opened while the drain began are handed over too.
      for (const conn of hub.connections()) {
        if (seen.has(conn)) continue;
        seen.add(conn);
        pending.add(conn);
        ctx.router.handOver(conn);
      }
      if (pending.size === 0) break;
      const late = Date.now() >= deadline;
      const now: DeviceConnection[] = [];
      for (const conn of pending) {
        if (conn.closed) pending.delete(conn);
        else if (late || conn.inFlight === 0) {
          pending.delete(conn);
          now.push(conn);
        }
      }
      await Promise.all(now.map((c) => ctx.router.markMoving(c.deviceId)));
      for (const conn of now) conn.close(CLOSE.restarting, 'relay restarting; reconnect');
      // Released now, not later by the close handler: origins stop sending requests here.
      await Promise.all(now.map((c) => ctx.releases.releaseHeld(c).catch(() => {})));
      if (pending.size > 0) await sleep(20);
    }
    // Keep-alive clients still talking to this node get `Connection: close` on each answer
    // (closingWhileDraining) and reconnect elsewhere, and origins that read the old owner
    // just before the release get `redo`: wait until both kinds of traffic have stopped.
    const quiet = () => Date.now() - Math.max(traffic.lastRequestAt, ctx.router.lastServedAt) >= DRAIN_QUIET_MS;
    while (Date.now() < deadline && (ctx.router.inFlight > 0 || !quiet())) await sleep(20);
    // Requests held for a phone that has not come back would wait out their own deadline (a
    // moving phone is waited for until then: docs/decisions/0209-a-moving-phone-is-waited-for-until-the-deadline.md).
    ctx.router.failHeld();
    disconnectStreams(); // those opened meanwhile (keep-alive connections)
  }

  /**
   * GET streams disconnect (buffering on for their resumption); the rest end. A
   * subscriptions/listen stream's end is graceful: the listen request's result, then the close
   * (StatelessEndpoint.listen, docs/PROTOCOL.md "Revision 2026-07-28").
   */
  function disconnectStreams(): void {
    for (const l of hub.allStreams()) {
      if (l.disconnect) l.disconnect();
      else l.end();
    }
  }

  const node: GatewayNode = {
    ctx,
    port,
    adminPort,
    fingerprint,
    control: (event) => bus.publishControl(event),
    drain: () => (draining ??= drainNode()),
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(sweeper);
      clearInterval(purger);
      journal.stop();
      untrack();
      mcp.close();
      for (const s of started) await s.close();
      hub.close();
      ctx.router.close();
      if (!ctx.state.draining) {
        ctx.state.draining = true;
        uws.us_listen_socket_close(listenSocket);
        const conns = [...hub.connections()];
        if (await othersAlive()) await Promise.all(conns.map((c) => ctx.router.markMoving(c.deviceId)));
        for (const conn of conns) conn.close(CLOSE.restarting, 'relay stopping');
      }
      // Streams and the stand-ins a drain left buffering end with the node.
      for (const l of hub.allStreams()) l.end();
      await ctx.router.farewell();
      // Last-seen times of the phones just closed, before the store goes away: within what is
      // left of --drain-ms (--drain-ms from now without a drain), and at least FLUSH_FLOOR_MS so
      // that the sockets a drain closed at its deadline are written too. A store that does not
      // answer would otherwise hold the exit for its query timeout (15 s), past the grace period
      // the chart gives a pod; what is not written by then is lost (docs/OPERATIONS.md).
      const flushFor = Math.max(FLUSH_FLOOR_MS, (drainDeadline ?? Date.now() + config.drainMs) - Date.now());
      let flushTimer: NodeJS.Timeout | undefined;
      const flushed = await Promise.race([
        ctx.devices.seen.flush().then(() => true),
        new Promise<false>((resolve) => (flushTimer = setTimeout(() => resolve(false), flushFor))),
      ]);
      clearTimeout(flushTimer);
      if (!flushed) log.warn('stopping without the last-seen times of phones: the store did not answer in time');
      uws.us_listen_socket_close(adminSocket);
      // Also drop idle keep-alive connections, which would otherwise keep reaching a stopped node.
      for (const a of [app, admin]) (a as unknown as { close?: () => void }).close?.();
    },
  };
  return node;
}

/** While draining, no new request arrived on the client port for this long: safe to exit. */
const DRAIN_QUIET_MS = 300;

/** The least a closing node waits for its last-seen times, even past --drain-ms (a healthy store takes milliseconds). */
const FLUSH_FLOOR_MS = 1000;

const HTTP_VERBS = new Set(['get', 'post', 'put', 'patch', 'del', 'options', 'head', 'any']);

/**
 * The app as route handlers see it: every response ends with `Connection: close` once the
 * node is draining, so keep-alive clients (and the load balancer's pooled connections) stop
 * reusing a connection to a node that is about to exit, and their next request opens a new
 * one to a live node. Also records when the last request arrived.
 *
 * A streamed response (SSE: `write` before `end`) has sent its headers with its first write.
 * uWS's `end(body, true)` writes `Connection: close` even then, into the chunked body, which
 * corrupts it: so a stream that opens while draining says it in its headers instead, and one
 * that opened before ends normally (its connection then closes with the node). Both rules are
 * kept where the writes happen: Exchange (src/gateway/http.ts) and SseStream (sse.ts).
 */
function closingWhileDraining(
  app: TemplatedApp,
  state: { draining: boolean },
  traffic: { lastRequestAt: number },
): TemplatedApp {
  type Handler = (res: HttpResponse, req: HttpRequest) => void;
  // The Exchange made in the handler reads `state` when it writes (src/gateway/http.ts runRoute).
  // A HEAD reaches a `head` handler (hosted mode's pages) or an `any` one (404, 405), whose answer
  // then goes without its body. Only `any` handlers ask for the method, off the per-request path
  // of the others.
  const wrap =
    (handler: Handler, route: RouteMetrics, verb: string): Handler =>
    (res, req) => {
      const now = Date.now();
      traffic.lastRequestAt = now;
      runRoute(state, handler, res, req, route, verb === 'head' || (verb === 'any' && req.getMethod() === 'head'), now);
    };
  const proxy: TemplatedApp = new Proxy(app, {
    get(target, prop) {
      if (typeof prop === 'string' && HTTP_VERBS.has(prop)) {
        return (pattern: string, handler: Handler) => {
          (target as unknown as Record<string, (p: string, h: Handler) => void>)[prop](
            pattern,
            wrap(handler, routeMetrics(pattern), prop),
          );
          return proxy;
        };
      }
      const v = Reflect.get(target, prop) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return proxy;
}

/** Another node claimed a device whose socket is here: close ours unless it is the newer one. */
async function supersede(ctx: GatewayContext, deviceId: string, epoch: number): Promise<void> {
  const conn = ctx.hub.device(deviceId);
  if (!conn) return;
  const mine = conn.epoch ?? (await conn.claim);
  if (mine !== undefined && mine > epoch) return;
  conn.close(CLOSE.superseded, 'superseded by a newer connection on another node', 'superseded');
}

/**
 * After a bus outage: first the releases the outage kept from the bus (phones that left
 * meanwhile), then keep or renew each local claim; a socket that lost its claim is stale.
 */
async function reclaimAll(ctx: GatewayContext): Promise<void> {
  await ctx.releases.retry();
  for (const conn of [...ctx.hub.connections()]) {
    const epoch = conn.epoch ?? (await conn.claim);
    try {
      const kept =
        epoch === undefined
          ? await ctx.bus.claimDevice(conn.deviceId)
          : await ctx.bus.reclaimDevice(conn.deviceId, epoch);
      if (kept === undefined) conn.close(CLOSE.superseded, 'superseded while the relay bus was down', 'superseded');
      else {
        conn.epoch = kept;
        ctx.releases.forget(conn.deviceId);
        // Closed meanwhile: its close released the epoch it held then, not this one.
        if (conn.closed) await ctx.releases.release(conn.deviceId, kept);
      }
    } catch (err) {
      ctx.log.warn({ deviceId: conn.deviceId, err: String(err) }, 'reclaim failed');
    }
  }
}

/** A journal read outstanding this long counts as the store being down (phonebridge_store_up 0). */
export const STORE_STALL_MS = 2000;
/**
 * Where the store counts its changes, a poll after none is skipped, but never more than this
 * many in a row: the store's health is still read (every 2.5 s at the default 250 ms).
 */
export const READ_AT_LEAST_EVERY = 10;

interface JournalTail {
  stop(): void;
  /** The last read succeeded and none has been outstanding for STORE_STALL_MS. */
  readonly storeUp: boolean;
  /** How long the last finished read took (ms), or how long the outstanding one has waited if longer. */
  readonly lastReadMs: number | undefined;
}

/**
 * Tails the store's invalidation journal: the CLI (another process, no bus) and other nodes
 * write it in the same transaction as the change, so it reaches this node within one poll.
 */
function tailControlJournal(ctx: GatewayContext, pollMs: number): JournalTail {
  // An opaque cursor: the store re-reads behind its high-water mark until transactions that
  // were still writing have settled (docs/decisions/0163-a-journal-tail-without-gaps.md).
  let cursor: string | null = null;
  // When the read in flight started (0: none). A store that stops answering without closing
  // the connection fails a read only at the query timeout (15 s); a read outstanding for
  // STORE_STALL_MS already says the store is not usable (docs/decisions/0206-store-stall-is-down.md).
  let startedAt = 0;
  let ok = true; // up from the start: the node starts only once the store has opened and migrated
  let lastMs: number | undefined;
  // Where the store counts its changes (the embedded database this process serves), a poll
  // reads only after the count moved, and at least every READ_AT_LEAST_EVERY polls: an idle
  // relay's reads of PGlite were about half of its idle CPU
  // (docs/decisions/0258-the-journal-read-after-a-change.md).
  const changeCount = ctx.store.changeCount;
  let changesAtLastRead: number | undefined;
  let skipped = 0;
  const timer = setInterval(() => void poll(), pollMs);
  timer.unref();
  // Every read is a read of the store: its outcome is the node's store health (phonebridge_store_up).
  const poll = async () => {
    if (startedAt) return;
    const changes = changeCount?.();
    if (changes !== undefined && changes === changesAtLastRead && ++skipped < READ_AT_LEAST_EVERY) return;
    skipped = 0;
    // Taken before the read: a change while it is under way is read by the next poll.
    changesAtLastRead = changes;
    startedAt = Date.now();
    try {
      const r = await ctx.store.tailControlEvents(cursor);
      ok = true;
      cursor = r.cursor;
      for (const e of r.events) applyControl(ctx, e);
    } catch (err) {
      ok = false;
      changesAtLastRead = undefined; // read again at the next poll
      ctx.log.debug({ err: String(err) }, 'control journal poll failed');
    } finally {
      lastMs = Date.now() - startedAt;
      startedAt = 0;
    }
  };
  void poll();
  return {
    stop: () => clearInterval(timer),
    get storeUp() {
      return ok && !(startedAt && Date.now() - startedAt >= STORE_STALL_MS);
    },
    get lastReadMs() {
      return startedAt ? Math.max(lastMs ?? 0, Date.now() - startedAt) : lastMs;
    },
  };
}

/**
 * Applies an invalidation on this node: sockets closed, caches and sessions dropped, and
 * everything the credential holds open here ended — its SSE streams (GET, resumed POST and
 * subscriptions/listen) and its calls in flight (the phone is told they are cancelled). Every
 * node applies every event (bus and journal), so this covers the whole cluster; applying one
 * twice is harmless.
 */
function applyControl(ctx: GatewayContext, event: ControlEvent): void {
  switch (event.type) {
    case 'device_removed':
      ctx.auth.invalidate({ deviceId: event.deviceId });
      ctx.hub.device(event.deviceId)?.close(CLOSE.removed, 'device removed', 'device_removed');
      ctx.hub.revoke({ deviceId: event.deviceId }, 'device_removed');
      void ctx.bus.sessions.deleteWhere({ deviceId: event.deviceId }).catch(() => {});
      break;
    case 'token_revoked':
      ctx.auth.invalidate({ tokenId: event.tokenId });
      ctx.hub.revoke({ tokenId: event.tokenId });
      void ctx.bus.sessions.deleteWhere({ tokenId: event.tokenId }).catch(() => {});
      break;
    case 'credential_revoked':
      // Only the node holding the phone's socket has it; the phone releases what that caller held.
      for (const deviceId of 'deviceIds' in event ? event.deviceIds : [event.deviceId])
        ctx.hub.device(deviceId)?.notify(CREDENTIAL_REVOKED_METHOD, { credential: event.credential });
      break;
    case 'sessions_ended':
      // Evicted beyond their key's session cap: their streams end wherever they are.
      for (const sessionId of event.sessionIds) ctx.hub.revoke({ sessionId });
      break;
    case 'feature':
      // Another feature's announcement (src/gateway/features.ts): its own handlers read it.
      return;
    case 'stream_live':
    case 'stream_released':
    case 'stream_lapsed':
      // A GET stream connected somewhere (one per GET): src/gateway/get-streams.ts reads these.
      return;
    case 'account_locked':
      ctx.auth.invalidate({ accountId: event.accountId });
      if (event.locked) {
        ctx.hub.revoke({ accountId: event.accountId });
        void dropAccountSessions(ctx, event.accountId);
      } else {
        ctx.hub.forgive({ accountId: event.accountId });
      }
      break;
  }
  ctx.log.info({ event: event.type }, 'control event applied');
}

/** A locked account's sessions go with it (its keys stay, so a client re-initializes after the unlock). */
async function dropAccountSessions(ctx: GatewayContext, accountId: string): Promise<void> {
  try {
    const [tokens, account] = await Promise.all([ctx.store.listTokens({ accountId }), ctx.store.getAccount(accountId)]);
    // Applied late (a slow store, a journal poll that carried the unlock too): an account that
    // is unlocked again keeps the sessions its clients opened since.
    if (!account?.locked) return;
    await Promise.all(tokens.map((t) => ctx.bus.sessions.deleteWhere({ tokenId: t.id })));
  } catch (err) {
    ctx.log.warn({ err: String(err) }, "dropping a locked account's sessions failed");
  }
}

/**
 * Exclusive (see listenExclusive): a second relay on the same port fails here instead of
 * starting cleanly and taking half the connections.
 */
function listen(app: TemplatedApp, host: string, port: number, flag: string): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    listenExclusive(app, host, port, (socket) =>
      socket
        ? resolve(socket)
        : reject(
            new ListenError(
              `cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port} (${flag}): the port is in use (another relay?) or the address is not on this host`,
            ),
          ),
    );
  });
}

function spkiFingerprint(certPem: string): string {
  const spki = new X509Certificate(certPem).publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
