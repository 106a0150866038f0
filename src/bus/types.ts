// The cluster bus: everything gateway nodes must share. One small interface, two drivers:
// `local` (in-process, single node — the default) and `redis` (many nodes).
import type { Scope } from '../store/types.ts';
import type { NodeHead } from './formats.ts';
import type { SessionRevision } from '../protocol/revisions.ts';

export interface SessionRecord {
  id: string;
  /** The access token (or API key) that opened the session: the session is bound to it. */
  tokenId: string;
  /**
   * The credential behind the token, as the phone knows the caller (`callerCredential`,
   * src/protocol/caller.ts): an OAuth grant's id, stable across refreshes, or the API key's id.
   * Absent in records written before it existed: read those as `tokenId`
   * (docs/decisions/0169-active-clients.md).
   */
  credential?: string;
  deviceId: string;
  accountId: string;
  revision: SessionRevision;
  scopes: Scope[];
  createdAt: number;
  /** The last request on the session (ms); on a Redis bus as of the last renewal there (≤ 2 s behind). */
  lastSeenAt: number;
  /**
   * `clientInfo` of the client's `initialize` (name, version), shortened and printable. Absent in
   * records written before it existed, and when the client sent none.
   */
  client?: { name: string; version?: string };
}

export interface SessionStore {
  /**
   * Stores a new session. With `maxPerToken`, the token's least recently used sessions beyond
   * that many are deleted; their ids are returned (docs/decisions/0040-credential-budgets.md).
   */
  create(s: SessionRecord, idleMs: number, maxPerToken?: number): Promise<string[]>;
  /** The live session, its idle clock renewed; undefined if unknown or expired. */
  touch(id: string, idleMs: number): Promise<SessionRecord | undefined>;
  /**
   * `touch` answered at once when this process can answer for the session: the in-process
   * store always; the Redis store while it holds a lease on it (docs/decisions/0133-session-leases.md).
   * Undefined otherwise: the caller then awaits `touch`. Lets a call go through without a wait.
   * `now`: the caller's reading of the clock (Date.now()), when it has one.
   */
  touchNow?(id: string, idleMs: number, now?: number): SessionRecord | undefined;
  delete(id: string): Promise<boolean>;
  /** Live sessions bound to a device: the MCP clients connected to it (the hosted dashboard). */
  countForDevice(deviceId: string): Promise<number>;
  /**
   * Live sessions bound to a device, most recently used first, at most `limit`: who is connected
   * to a phone and when each last made a request (the hosted dashboard's active clients).
   */
  listForDevice(deviceId: string, limit: number): Promise<SessionRecord[]>;
  /** Sessions bound to a device or token, for invalidation. */
  deleteWhere(match: { deviceId?: string; tokenId?: string }): Promise<number>;
}

import type { ControlEvent as JournalEvent } from '../store/types.ts';
/**
 * What must take effect on every node at once: the store journal's events, plus sessions the
 * bus ended itself (evicted beyond a key's session cap), which only travel on the bus
 * (docs/decisions/0003-announcements-reach-every-node.md).
 */
export type ControlEvent =
  | JournalEvent
  | { type: 'sessions_ended'; sessionIds: string[] }
  /**
   * A node connected one of a session's GET streams (new or resumed, src/gateway/get-streams.ts):
   * the session's notifications go there now, so other nodes stop collecting for its dropped
   * stream. `ref` lets the announcing node know its own event when it comes back: what arrives
   * after it is the new stream's (docs/decisions/0246-get-stream-handover.md). A node that does
   * not know the type ignores it.
   */
  | { type: 'stream_live'; sessionId: string; streamId: string; nodeId: string; ref: string }
  /**
   * The answer of a node that dropped a stand-in or connection on a `stream_live` (its `ref`):
   * what it buffered is in the replay buffer now, so the resuming node may read it.
   */
  | { type: 'stream_released'; sessionId: string; nodeId: string; ref: string }
  /**
   * The session's newest GET stream dropped and was not resumed within its grace: a node with
   * an older stream of the session, silenced by that one, announces it anew (`stream_live`).
   */
  | { type: 'stream_lapsed'; sessionId: string; nodeId: string }
  /**
   * An optional feature's own announcement to its instances on every node
   * (src/gateway/features.ts): the gateway passes it by without reading it.
   */
  | { type: 'feature'; feature: string; data: Record<string, string> };

/** Who holds a device's socket. A request must carry the epoch; a stale owner can never answer. */
export interface DeviceOwner {
  nodeId: string;
  epoch: number;
}

/** One buffered SSE event: `id` is `<streamId>:<seq>` (see parseEventId in util.ts). */
export interface ReplayEvent {
  id: string;
  data: string;
}

export interface Bus {
  readonly kind: 'local' | 'redis';
  readonly nodeId: string;
  readonly sessions: SessionStore;
  /** False while the backend is unreachable (every call then fails fast with BusUnavailableError). */
  readonly available: boolean;
  /**
   * How long the node's last liveness round trip to the backend took (ms): Redis' heartbeat;
   * undefined for a backend without one (the in-process bus). /readyz reports it.
   */
  readonly lastRoundTripMs: number | undefined;

  /** Remembers a challenge nonce for `ttlMs`. */
  putNonce(nonce: string, deviceId: string, ttlMs: number): Promise<void>;
  /** Consumes a nonce: the device id it was issued for, once; undefined afterwards or when expired. */
  takeNonce(nonce: string): Promise<string | undefined>;

  /** Fixed-window counter shared by all nodes: increments and returns the new count. */
  hit(key: string, windowMs: number): Promise<number>;
  /** Current count of a window without incrementing. */
  peek(key: string): Promise<number>;
  /** Takes back one hit (counted up front, then found not to count): never below 0, same window end. */
  unhit(key: string): Promise<void>;
  /**
   * Sets a flag that `peek` reads as 1 for `ttlMs` from now, renewing one set earlier (unlike
   * `hit`, whose window keeps its first end).
   */
  mark(key: string, ttlMs: number): Promise<void>;

  /**
   * Reaches every node, this one included, once each. Resolves once the event is on its way to
   * every node: a client told "done" after it cannot reach another node before the event does
   * (docs/decisions/0133-session-leases.md, "Staleness bounds").
   */
  publishControl(event: ControlEvent): Promise<void>;
  onControl(handler: (event: ControlEvent) => void): void;

  // --- Device ownership --------------------------------------------------------------------
  /**
   * This node now holds the device's socket. Returns the new epoch (monotonic per device).
   * A different previous owner gets `onSuperseded(deviceId, epoch)` so it closes its socket (4001).
   */
  claimDevice(deviceId: string): Promise<number>;
  /**
   * After a bus outage: keeps the claim if the record is still (this node, epoch), claims anew if
   * the device has no live owner (returns the new epoch), and returns undefined if another live node
   * (or a newer socket here) owns it — then this socket is stale and should be closed with 4001.
   */
  reclaimDevice(deviceId: string, epoch: number): Promise<number | undefined>;
  /** Clears ownership if it is still (this node, epoch); false (a no-op) otherwise. */
  releaseDevice(deviceId: string, epoch: number): Promise<boolean>;
  /** The current owner, or undefined if none or its node is not alive. */
  ownerOf(deviceId: string): Promise<DeviceOwner | undefined>;
  /** Another node claimed a device this node owned; `epoch` is the new owner's. */
  onSuperseded(handler: (deviceId: string, epoch: number) => void): void;

  // --- Node liveness -----------------------------------------------------------------------
  /** Node ids currently announced (this one included). */
  aliveNodes(): Promise<string[]>;
  /** Whether another node was alive at this node's last heartbeat (no round trip). */
  othersAlive(): boolean;
  /** Another node vanished (crash, kill -9, close, or restart under the same id). */
  onNodeDown(handler: (nodeId: string) => void): void;

  // --- Messaging -----------------------------------------------------------------------------
  /**
   * Delivers an opaque message to one node's onNodeMessage (and onNodeBytes) handlers; false
   * if that node is not listening. `payload`, when given, is the message's tail as bytes
   * (a phone frame: never turned into a string on its way). `msg` may be a NumberedLine, whose
   * String() is the message's text: a driver that writes bytes writes it without the string.
   */
  sendToNode(nodeId: string, msg: NodeHead, payload?: Buffer): Promise<boolean>;
  /**
   * sendToNode for a message whose sender does not act on who heard it (an answer to another
   * node's request): a driver may skip the per-message reply (docs/decisions/0142-quiet-answers.md).
   * Resolves once the bus has taken it; rejects as sendToNode does (BusUnavailableError: not
   * sent, send again; BusTimeoutError: it may have been delivered).
   */
  replyToNode(nodeId: string, msg: NodeHead, payload?: Buffer): Promise<void>;
  /**
   * sendToNode for a message whose sender must learn when nobody heard it, but need not wait
   * to know that it was heard (a request to another node): false if the driver knows at once
   * that nobody heard it; true once the bus has taken it, and then, if nobody heard it after
   * all, `bounce` reaches this node's own onNodeMessage handlers instead. A driver may skip the
   * per-message reply this way (docs/decisions/0225-quiet-requests.md). Rejects as sendToNode.
   */
  sendOrBounce(nodeId: string, msg: NodeHead, payload: Buffer | undefined, bounce: NodeHead): Promise<boolean>;
  onNodeMessage(handler: (msg: string) => void): void;
  /**
   * onNodeMessage as bytes: the message is bytes[start, end), where it came off the wire (no
   * string, no copy, no view made for it: a view costs the runtime about a thousand
   * instructions, and the reader makes the one the message needs, its payload's).
   */
  onNodeBytes(handler: (bytes: Buffer, start: number, end: number) => void): void;
  /** Fans a frame out to every node subscribed to the device; resolves with how many nodes got it. */
  publishDevice(deviceId: string, frame: string): Promise<number>;
  /**
   * Resolves once subscribed (frames published afterwards are not missed). Subscriptions are
   * refcounted: the node unsubscribes when its last local listener for the device leaves.
   */
  subscribeDevice(deviceId: string, handler: (frame: string) => void): Promise<() => void>;

  // --- SSE replay buffer (bounded; dropped with the session) ----------------------------------
  /**
   * Buffers one event of a stream; returns its id (unique within the session, encodes the
   * stream). Undefined when the session no longer exists: nothing is kept (nothing could resume
   * it), and the event goes out without an id rather than with one the session already used.
   */
  appendEvent(sessionId: string, streamId: string, data: string): Promise<string | undefined>;
  /** Buffered events of `lastEventId`'s stream after it, oldest first; [] if unknown or malformed. */
  replayAfter(sessionId: string, lastEventId: string): Promise<ReplayEvent[]>;

  // --- Health ----------------------------------------------------------------------------------
  /** The backend became unreachable: in-flight cross-node work will not complete. */
  onUnavailable(handler: () => void): void;
  /**
   * The bus is whole again (resubscribed, re-announced) after an outage or after this node was
   * presumed dead. Messages sent meanwhile may be lost; the gateway should reclaimDevice its sockets.
   */
  onReconnected(handler: () => void): void;

  close(): Promise<void>;
}
