// The fast path of a session POST (docs/decisions/0131-synchronous-local-calls.md): one object
// per call is the body's target, the router's sink, the exchange's abort target and the
// in-flight entry. McpEndpoint decides whether a call may take it (FastPostHost.fastPost).
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import type { AbortTarget, BodyTarget, Exchange } from './http.ts';
import { Deadlines, type Timed } from './deadlines.ts';
import type { LocalRoute } from './route.ts';
import type { Caller, ReplySink } from './device-connection.ts';
import type { BufferPool } from './buffer-pool.ts';
import { answerPoolOf, takeAnswerBuffer } from './answer-buffers.ts';
import { withId } from '../protocol/frame.ts';
import { RequestMemo, type ClientRequestBytes } from '../protocol/request-bytes.ts';
import { JSON_HEADERS, SLOW_ANSWER_MS } from './mcp-stateless.ts';
import type { EventStream } from './session-streams.ts';
import type { Credential } from './auth.ts';
import { errorResponse, type JsonRpcId } from '../protocol/jsonrpc.ts';
import type { JsonRpcErrorObject } from '../protocol/errors.ts';
import { insufficientScopeChallenge } from '../protocol/scopes.ts';
import type { Scope } from '../store/types.ts';
import type { SessionRecord } from '../bus/types.ts';
import type { McpHeaders } from './mcp-headers.ts';
import { hashIntWith, hashString, hashStringWith } from './slot-table.ts';

/** What a FastPost needs of the endpoint that started it (McpEndpoint). */
export interface FastPostHost {
  /** Takes the call on the fast path; false sends it to slowPost (nothing was done then). */
  fastPost(call: FastPost, raw: Buffer): boolean;
  slowPost(ex: Exchange, h: McpHeaders, body: Buffer): void;
  failPost(ex: Exchange, err: unknown): void;
  /** The call is answered: no longer cancellable by the client. */
  settled(call: FastPost): void;
  openPostStream(call: FastPost): EventStream;
  cancelRoute(route: LocalRoute): void;
  orphanRoute(route: LocalRoute): void;
  observe(method: string, started: number, bytesIn: number, bytesOut: number, outcome: string): void;
}

export function cancelEntry(e: (() => void) | FastPost | undefined): void {
  if (typeof e === 'function') e();
  else e?.cancel();
}

/**
 * What the fast path keeps of a cached credential: its caller, made once, and its client's last
 * request read in full (RequestMemo). The auth cache replaces the credential when it changes.
 */
interface FastClient {
  readonly caller: Caller;
  readonly memo: RequestMemo;
}
const fastClients = new WeakMap<Credential, FastClient>();

/** FastPosts that may still open an SSE stream: their answer is slow (SLOW_ANSWER_MS). */
const slowAnswers = new Deadlines<FastPost>((call) => {
  if (!call.ex.aborted) call.open();
});

/**
 * One POST on the fast path (McpEndpoint.fastPost), from the body to the answer: the body's target,
 * the router's sink, the exchange's abort target and the in-flight entry, so a call creates
 * this object and its route, not a closure for each role. It behaves as answerOne does for a
 * request without a progress token.
 */
export class FastPost implements BodyTarget, ReplySink, AbortTarget, Timed {
  readonly started = performance.now();
  dueAt = 0;
  prevDue: Timed | undefined = undefined;
  nextDue: Timed | undefined = undefined;
  dueList: object | undefined = undefined;
  session?: SessionRecord;
  route?: LocalRoute;
  /** Its entry in InFlightCalls, and the key's hash there. */
  key?: string;
  keyHash = 0;
  timeoutMs = 0;
  private stream?: EventStream;
  private method = '';
  private id: JsonRpcId = 0;
  private bytesIn = 0;

  constructor(
    private readonly endpoint: FastPostHost,
    readonly ex: Exchange,
    readonly h: McpHeaders,
    readonly cred: Credential,
  ) {}

  bodyRead(body: Buffer): void {
    if (this.ex.aborted) return;
    let taken = false;
    try {
      taken = this.endpoint.fastPost(this, body);
    } catch (err) {
      // Once started the request may have reached the phone: it must not be sent again.
      if (this.session) return this.endpoint.failPost(this.ex, err);
    }
    if (!taken) this.endpoint.slowPost(this.ex, this.h, body);
  }

  bodyFailed(): void {
    // BodyTooLarge: Exchange.readBody has answered 413 already.
  }

  /** Its credential's FastClient. */
  client(): FastClient {
    let c = fastClients.get(this.cred);
    if (!c) {
      const t = this.cred.token;
      const caller = Object.freeze({ scopes: t.scopes, tokenId: t.id, accountId: this.cred.account.id });
      fastClients.set(this.cred, (c = { caller, memo: new RequestMemo() }));
    }
    return c;
  }

  start(session: SessionRecord, req: ClientRequestBytes, bytesIn: number): void {
    this.session = session;
    this.method = req.method;
    this.id = req.id;
    this.bytesIn = bytesIn;
    if ((this.h.accept ?? '').includes('text/event-stream')) slowAnswers.start(this, SLOW_ANSWER_MS);
  }

  open(): EventStream {
    return (this.stream ??= this.endpoint.openPostStream(this));
  }

  respond(frame: Buffer): void {
    this.answer(frame, undefined);
  }

  /**
   * The phone's answer on this node (`view` valid during this call only). Sent whole in this
   * turn's write, it is copied into a reused buffer; on a stream, which keeps what it sends for
   * a resuming client, into one of its own.
   */
  respondAsReceived(view: Buffer, idStart: number, idEnd: number, clientId: JsonRpcId): void {
    if (this.stream) this.answer(withId(view, idStart, idEnd, clientId), undefined);
    else {
      const frame = withId(view, idStart, idEnd, clientId, takeAnswerBuffer);
      this.answer(frame, undefined, answerPoolOf(frame));
    }
  }

  related(frame: Buffer): void {
    void this.open().send(frame);
  }

  fail(error: JsonRpcErrorObject): void {
    this.answer(Buffer.from(errorResponse(this.id, error)), error);
  }

  /** The client's notifications/cancelled (this node, or relayed by another). */
  cancel(): void {
    if (this.route) this.endpoint.cancelRoute(this.route);
  }

  /** Session revisions: a disconnect is not a cancellation; the call runs on as an orphan unless a GET can resume it. */
  exchangeAborted(): void {
    if (this.stream === undefined && this.route) this.endpoint.orphanRoute(this.route);
  }

  /** `pool`: the frame is `pool`'s, given back once written (never with a stream or a refusal). */
  private answer(frame: Buffer, refusal: JsonRpcErrorObject | undefined, pool?: BufferPool): void {
    slowAnswers.cancel(this);
    this.endpoint.settled(this);
    const ex = this.ex;
    if (refusal?.data && (refusal.data as { code?: string }).code === 'insufficient_scope' && !this.stream) {
      const scope = (refusal.data as { scope: Scope }).scope;
      ex.send(403, { ...JSON_HEADERS, 'WWW-Authenticate': insufficientScopeChallenge(scope) }, frame);
      this.endpoint.observe(this.method, this.started, this.bytesIn, frame.length, 'forbidden');
      return;
    }
    const outcome = refusal ? 'error' : 'ok';
    if (this.stream) {
      const s = this.stream;
      void s.send(frame);
      void s
        .end()
        .then(() =>
          this.endpoint.observe(
            this.method,
            this.started,
            this.bytesIn,
            frame.length,
            ex.aborted ? 'aborted' : outcome,
          ),
        );
      return;
    }
    ex.send(200, JSON_HEADERS, frame, false, pool);
    this.endpoint.observe(this.method, this.started, this.bytesIn, frame.length, ex.aborted ? 'aborted' : outcome);
  }
}

export function inFlightKey(sessionId: string, id: JsonRpcId): string {
  return `${sessionId}\u0000${typeof id}:${id}`;
}

/** Session ids' hashes, once per session record: the fast path meets the same record each call. */
const sessionHashes = new WeakMap<SessionRecord, number>();

/** The hash of a session's id (hashString's, so that a session id alone gives the same). */
export function sessionHashOf(session: SessionRecord): number {
  let h = sessionHashes.get(session);
  if (h === undefined) sessionHashes.set(session, (h = hashString(session.id)));
  return h;
}

/**
 * The hash of inFlightKey(session, id) in InFlightCalls, from the session id's hash and the
 * client's id: the key's characters are never hashed (a session id is 43 of them, and a
 * string's hash here costs several ns each). The client picks its ids, so they go through
 * the seeded hash (slot-table.ts) with the session's hash as the seed.
 */
export function inFlightHash(sessionHash: number, id: JsonRpcId): number {
  if (typeof id === 'number' && (id | 0) === id) return hashIntWith(id, sessionHash);
  return hashStringWith(typeof id === 'string' ? id : String(id), sessionHash ^ 0x2c1b3c6d);
}
