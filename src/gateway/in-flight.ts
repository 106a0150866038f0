// The requests this node carries to phones for its clients, by session and client id: what a
// client's notifications/cancelled finds (sent here, or relayed by the node that received it),
// and what refuses a second request whose id is in use (docs/decisions/0216-duplicate-request-ids.md).
// Also the general path's trip of one request to the phone (`forward`); the fast path
// (fast-post.ts) enters its calls here itself.
import { Buffer } from 'node:buffer';
import type { Exchange } from './http.ts';
import type { FastPost } from './fast-post.ts';
import { cancelEntry, inFlightHash, inFlightKey } from './fast-post.ts';
import type { Credential } from './auth.ts';
import type { GatewayContext } from './context.ts';
import { duplicateRequestId, errorResponse, type JsonRpcId, type JsonRpcRequest } from '../protocol/jsonrpc.ts';
import { relayError, type JsonRpcErrorObject } from '../protocol/errors.ts';
import { requestTimeoutMs } from '../protocol/timeouts.ts';
import { withCallerContext } from '../protocol/caller.ts';
import { endOnAnswer, tracingOn } from '../observability/tracing.ts';
import { serverSpan } from '../observability/relay-spans.ts';
import { SlotTable, givenHashes, hashString } from './slot-table.ts';

/** A forwarded request's answer (client id restored), and the relay's refusal if it made one. */
export interface Outcome {
  frame: Buffer;
  refusal?: JsonRpcErrorObject;
}

/** What a client's cancellation reaches: a general-path request's cancel, or a FastPost. */
type Entry = (() => void) | FastPost;

export class InFlightCalls {
  /**
   * A table that does not churn (docs/decisions/0236-tables-that-do-not-churn.md), keyed by
   * inFlightKey and always given inFlightHash's hash (its own hash function is never used).
   */
  private readonly entries = new SlotTable<string, Entry>(givenHashes, '');

  constructor(private readonly ctx: GatewayContext) {
    // A client's notifications/cancelled may land on another node than its request.
    ctx.router.onClientCancel((sessionId, requestId) => this.cancel(sessionId, requestId));
  }

  has(key: string, h: number): boolean {
    return this.entries.has(key, h);
  }

  /** A FastPost takes its id (fast-post.ts): McpEndpoint.fastPost checked it was free. */
  add(key: string, h: number, call: FastPost): void {
    this.entries.set(key, call, h);
  }

  delete(key: string, h: number): void {
    this.entries.delete(key, h);
  }

  /** Cancels the session's request `requestId` on this node; false when it is not here. */
  cancel(sessionId: string, requestId: JsonRpcId): boolean {
    const e = this.entries.get(inFlightKey(sessionId, requestId), inFlightHash(hashString(sessionId), requestId));
    cancelEntry(e);
    return e !== undefined;
  }

  /**
   * Sends one request to the phone, wherever it is; resolves with the answer. `sessionId`
   * undefined (2026-07-28): closing the response is the only way to cancel the request.
   */
  forward(
    ex: Exchange,
    cred: Credential,
    deviceId: string,
    sessionId: string | undefined,
    msg: JsonRpcRequest,
    related?: (frame: Buffer) => void,
    /** Whether a GET could still resume the answer once the client is gone (its SSE stream opened). */
    resumable?: () => boolean,
    /** Sized from a tool header (docs/decisions/0181-tool-headers.md); else from the body. */
    headerTimeoutMs?: number,
    /** A tools/call's `Mcp-Param-*` headers to check where the phone is (Caller.toolHeaders). */
    toolHeaders?: Record<string, string>,
  ): Promise<Outcome> {
    const key = sessionId === undefined ? undefined : inFlightKey(sessionId, msg.id);
    const h = sessionId === undefined ? 0 : inFlightHash(hashString(sessionId), msg.id);
    if (key !== undefined && this.entries.has(key, h)) {
      // Ids are unique within a session; the first request keeps the id, and its cancellation
      // (docs/decisions/0216-duplicate-request-ids.md).
      const e = duplicateRequestId(msg.id);
      return Promise.resolve({ frame: Buffer.from(errorResponse(msg.id, e)), refusal: e });
    }
    if (this.ctx.hub.isRevoked({ tokenId: cred.token.id, deviceId, accountId: cred.account.id })) {
      const e = relayError('cancelled', 'the credential was revoked');
      return Promise.resolve({ frame: Buffer.from(errorResponse(msg.id, e)), refusal: e });
    }
    const traced = tracingOn ? serverSpan(ex, msg, sessionId) : undefined;
    return new Promise((resolve) => {
      let settled = false;
      // The id is taken from now on (a request with the same id is refused above); a
      // notifications/cancelled before the router's handle exists cancels once it does.
      let cancelled = false;
      if (key !== undefined) this.entries.set(key, () => (cancelled = true), h);
      const settle = (o: Outcome) => {
        settled = true;
        if (key !== undefined) this.entries.delete(key, h);
        resolve(o);
      };
      let sink = {
        respond: (frame: Buffer) => settle({ frame }),
        related,
        fail: (e: JsonRpcErrorObject) => settle({ frame: Buffer.from(errorResponse(msg.id, e)), refusal: e }),
      };
      if (traced) sink = endOnAnswer(sink, traced.span);
      const timeoutMs = headerTimeoutMs ?? requestTimeoutMs(msg.method, msg.params, this.ctx.config.requestTimeoutMs);
      void this.ctx.router
        .request(
          deviceId,
          msg,
          withCallerContext(msg.params, cred.token),
          {
            scopes: cred.token.scopes,
            tokenId: cred.token.id,
            accountId: cred.account.id,
            trace: traced?.ctx,
            toolHeaders,
          },
          sink,
          timeoutMs,
        )
        .then((handle) => {
          if (settled) return;
          if (key !== undefined) this.entries.set(key, handle, h);
          if (cancelled) return handle();
          // 2026-07-28: closing the response cancels the request, and the phone is told. Session
          // revisions: "disconnection SHOULD NOT be interpreted as the client cancelling its
          // request" — it runs to its end (its timeout bounds it), a streamed answer still reaches
          // the replay buffer, and the client's notifications/cancelled still cancels it. A call
          // no GET can resume (its stream never opened) is an orphan: it stops counting against
          // its key and is bounded per phone (docs/decisions/0042-abandoned-calls.md).
          if (sessionId === undefined) ex.onAbort(handle);
          else ex.onAbort(() => resumable?.() || handle.orphan?.());
        });
    });
  }
}
