// initialize on the session revisions: the relay answers it itself, from the phone's cached
// initialize result, within the per-key and per-address limits, and creates the session on
// the bus so that every node serves it.
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import type { Exchange } from './http.ts';
import type { ObserveCall } from './single-answer.ts';
import { FORWARDED_CHAIN, type McpHeaders } from './mcp-headers.ts';
import type { SessionLookup } from './session-lookup.ts';
import { limitKey, pickClientAddress } from './client-address.ts';
import { cachedInitialize, JSON_HEADERS } from './mcp-stateless.ts';
import type { Credential } from './auth.ts';
import type { GatewayContext } from './context.ts';
import type { SessionRecord } from '../bus/types.ts';
import { errorResponse, resultResponse, type JsonRpcRequest } from '../protocol/jsonrpc.ts';
import { INVALID_REQUEST } from '../protocol/errors.ts';
import { negotiateRevision } from '../protocol/revisions.ts';
import { clientInfoOf } from '../protocol/client-info.ts';
import { callerCredential } from '../protocol/caller.ts';
import { metrics, rateLimited } from '../metrics.ts';
import { tracingOn } from '../observability/tracing.ts';
import { answeredSpan } from '../observability/relay-spans.ts';

export class SessionOpener {
  constructor(
    private readonly ctx: GatewayContext,
    private readonly sessions: SessionLookup,
    private readonly observe: ObserveCall,
  ) {}

  async open(
    ex: Exchange,
    h: McpHeaders,
    cred: Credential,
    msg: JsonRpcRequest,
    started: number,
    bytesIn: number,
  ): Promise<void> {
    const { initializePerMinute, initializePerMinutePerAddress, maxSessionsPerKey } = this.ctx.config.budgets;
    if (ex.aborted) return; // the client's address is read from its response, valid until it goes
    // Keyed here, not per call: only initialize counts per address.
    const chain = h[FORWARDED_CHAIN];
    const address = limitKey(
      pickClientAddress(
        Buffer.from(ex.res.getRemoteAddressAsText()).toString(),
        chain === undefined ? [] : [chain],
        this.ctx.config,
      ),
    );
    // Counted on the bus, so the limits hold across nodes; the key's first, then the address's.
    const [byKey, byAddress] = await Promise.all([
      this.ctx.bus.hit(`init:k:${cred.token.id}`, 60_000),
      this.ctx.bus.hit(`init:a:${address}`, 60_000),
    ]);
    if (byKey > initializePerMinute || byAddress > initializePerMinutePerAddress) {
      rateLimited[byKey > initializePerMinute ? 'initialize_per_key' : 'initialize_per_address'].inc();
      const who = byKey > initializePerMinute ? 'this key' : 'this address';
      return ex.send(
        429,
        { ...JSON_HEADERS, 'Retry-After': '60' },
        errorResponse(msg.id, {
          code: INVALID_REQUEST,
          message: `Too many sessions created by ${who} in the last minute; reuse a session or retry later`,
        }),
      );
    }
    const revision = negotiateRevision(msg.params?.protocolVersion);
    const deviceId = cred.token.deviceId;
    const cached = await cachedInitialize(this.ctx, deviceId, true);
    const now = Date.now();
    const client = clientInfoOf(msg.params);
    const session: SessionRecord = {
      id: randomBytes(18).toString('base64url'),
      tokenId: cred.token.id,
      credential: callerCredential(cred.token),
      deviceId,
      accountId: cred.account.id,
      revision,
      scopes: cred.token.scopes,
      createdAt: now,
      lastSeenAt: now,
      ...(client ? { client } : {}),
    };
    const evicted = await this.ctx.bus.sessions.create(session, this.ctx.config.sessionIdleMs, maxSessionsPerKey);
    // The key's least recently used sessions beyond its cap are gone: so are their streams, on every node.
    // Awaited: once the client has its new session, the evicted ones are refused on every node
    // (their leases there end on this broadcast: docs/decisions/0133-session-leases.md).
    if (evicted.length > 0)
      await this.ctx.bus.publishControl({ type: 'sessions_ended', sessionIds: evicted }).catch(() => {});
    this.sessions.remember(session);
    metrics.sessionsCreated.inc();
    const out = resultResponse(msg.id, { ...cached, protocolVersion: revision });
    if (tracingOn) answeredSpan(ex, msg, session.id, started);
    ex.send(200, { ...JSON_HEADERS, 'Mcp-Session-Id': session.id }, out);
    this.observe('initialize', started, bytesIn, out.length, 'ok', ex);
  }
}
