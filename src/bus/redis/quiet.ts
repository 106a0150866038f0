// Node messages whose sender does not wait for Redis' reply, published on a connection of
// their own whose replies are off (CLIENT REPLY OFF): answers to another node's request (nobody
// needs to know how many heard them, docs/decisions/0142-quiet-answers.md), and requests, which
// go as a script that tells the sender when nobody heard one (publishOrBounce,
// docs/decisions/0225-quiet-requests.md). Redis' reply to each publish would otherwise wake
// this process once per message, an event-loop iteration of its own on a quiet node.
//
// Nothing is lost silently: a message resolves only once a later reply on the same connection
// shows Redis read it — `CLIENT REPLY ON` and the `ECHO` of a token of its own (their +OK and
// token, then replies off again at once), sent at most CONFIRM_MS after the first unconfirmed
// message, or at the end of the turn past CONFIRM_BYTES — and rejects with BusUnavailableError if
// the connection closes first, so the caller sends it again exactly as after a publish whose
// reply never came. The token shows where the replies are after commands Redis refused in
// silence (-BUSY while replies were off); what that cannot show is in
// docs/decisions/0234-counted-publishes-on-the-quiet-connection.md, amended.
//
// Publishes whose receiver count is wanted (`publishCounted`: a busy turn's requests, every
// sendToNode) go here too, between `CLIENT REPLY ON` and `OFF`, and their replies are read by
// replies.ts instead of ioredis's command queue
// (docs/decisions/0234-counted-publishes-on-the-quiet-connection.md). Once replies are off,
// every command on this connection is written here and its reply read there, in order.
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { TurnBytes } from './turn-bytes.ts';
import { keptBytes } from '../../protocol/json-bytes.ts';
import { busPublish, redisCommand } from '../../metrics.ts';
import { BusTimeoutError, BusUnavailableError } from '../errors.ts';
import {
  DONE,
  integerReply,
  MORE,
  readRepliesDirectly,
  WRONG,
  type Awaited,
  type ReplyQueue,
  type Verdict,
} from './replies.ts';

/** Longest a message waits for its confirmation on a connection that stays up. */
export const CONFIRM_MS = 100;
/** Unconfirmed bytes that ask for a confirmation at the end of the turn instead. */
export const CONFIRM_BYTES = 1 << 20;

const OFF = '*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n';
const OFF_BYTES = Buffer.from(OFF);
const ON = '*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n';
// KEYS none; ARGV: channel, message, the sender's own channel, what to tell it if nobody heard.
const BOUNCE = "if redis.call('PUBLISH',ARGV[1],ARGV[2])==0 then redis.call('PUBLISH',ARGV[3],ARGV[4]) end";
const BOUNCE_SCRIPT = `$${BOUNCE.length}\r\n${BOUNCE}\r\n`;
/** A channel nobody listens on, for the script's trial run. */
const PROBE = 'phonebridge:probe';

/**
 * A bulk string's first part written from bytes kept in advance with integers between them (a
 * node message's header line: node-outbox.ts), never made into a string
 * (docs/decisions/0263-header-lines-written-as-bytes.md).
 */
export interface NumberedHead {
  /** One more than `numbers`: the bytes before the first number, between each two, after the last. */
  texts: readonly Buffer[];
  /** Non-negative safe integers. */
  numbers: readonly number[];
}

/** A message's head: its text, or a NumberedHead. */
export type QuietHead = string | NumberedHead;

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

/**
 * `CLIENT REPLY ON`'s +OK and the ECHO of a token behind it: Redis read every quiet message
 * written before them. Only this confirmation's ECHO answers its token, so its reply shows
 * where the replies are, even after commands Redis refused in silence (replies.ts).
 */
class Confirmation implements Awaited {
  readonly asked = performance.now();
  private on = false;
  /** The token as a bulk string: the ECHO's argument, and so its reply. */
  private readonly echoed: string;
  constructor(
    private readonly batch: Waiter[],
    token: string,
  ) {
    this.echoed = `$${token.length}\r\n${token}\r\n`;
  }
  /** `CLIENT REPLY ON` and `ECHO token`, as RESP. */
  get command(): string {
    return `${ON}*2\r\n$4\r\nECHO\r\n${this.echoed}`;
  }
  reply(b: Buffer, start: number, end: number, late: boolean): Verdict {
    if (!this.on && b[start] === 0x2b) {
      this.on = true; // +OK: replies are on
      return MORE;
    }
    if (!this.claims(b, start, end)) return WRONG;
    if (late) return DONE;
    if (this.batch.length) busPublish.observeTimes((performance.now() - this.asked) / 1000, this.batch.length);
    settle(this.batch);
    return DONE;
  }
  claims(b: Buffer, start: number, end: number): boolean {
    const want = this.echoed;
    if (end - start !== want.length) return false;
    for (let i = 0; i < want.length; i++) if (b[start + i] !== want.charCodeAt(i)) return false;
    return true;
  }
  fail(err: Error): void {
    settle(this.batch, err);
  }
}

/** A PUBLISH's reply: how many subscribers received the message. */
class Counted implements Awaited {
  readonly asked = performance.now();
  constructor(
    private readonly resolve: (receivers: number) => void,
    private readonly reject: (err: Error) => void,
    private readonly asError: (err: unknown) => Error,
  ) {}
  reply(b: Buffer, start: number, end: number, late: boolean): Verdict {
    // A count, or Redis' error for this command (-BUSY with replies on): anything else is another's.
    if (b[start] !== 0x3a && b[start] !== 0x2d) return WRONG;
    if (late) return DONE;
    const n = integerReply(b, start, end);
    const seconds = (performance.now() - this.asked) / 1000;
    busPublish.observe(seconds);
    redisCommand.observe(seconds);
    if (typeof n === 'number') this.resolve(n);
    else this.reject(this.asError(n));
    return DONE;
  }
  fail(err: Error): void {
    // Written, then no reply: it may have been published (and heard), so it is in doubt.
    this.reject(
      err instanceof BusTimeoutError
        ? err
        : new BusTimeoutError('cluster bus connection closed before Redis answered the message', { cause: err }),
    );
  }
}

// The RESP around a message that depends only on its channels, as bytes kept per channel: a
// node's messages go to few channels (its peers', its own for bounces), and bytes made once are
// copied into the turn for a fraction of what encoding the string costs each time
// (turn-bytes.ts).

/** `PUBLISH channel` up to its message, as RESP. */
const publishBefore = keptBytes((channel) => `*3\r\n$7\r\nPUBLISH\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`);

/** The bounce script's EVAL up to its message (ARGV[2]), published on `channel`, as RESP. */
const evalBefore = keptBytes(
  (channel) => `*7\r\n$4\r\nEVAL\r\n${BOUNCE_SCRIPT}$1\r\n0\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`,
);

/** The bounce script's `back` (ARGV[3]), after the message. */
const backArgument = keptBytes((back) => `$${Buffer.byteLength(back)}\r\n${back}\r\n`);

/** A bulk string's length line and its first part, `head`, whose `more` bytes follow. */
function addHead(t: TurnBytes, head: QuietHead, more: number): number {
  return typeof head === 'string' ? t.addBulkStart(head, more) : t.addNumberedBulkStart(head.texts, head.numbers, more);
}

function confirmNow(q: QuietPublisher): void {
  q.confirm();
}

function uncork(q: QuietPublisher): void {
  q.uncork();
}

export class QuietPublisher {
  private waiting: Waiter[] = [];
  private bytes = 0;
  private timer?: NodeJS.Timeout;
  private soon = false;
  /** The socket replies were turned off on (a reconnect is a new socket, replies on again). */
  private offOn?: Socket;
  /** The socket the bounce script was found to run on (see turnOff). */
  private bouncesOn?: Socket;
  /** This turn's commands, until it ends (setImmediate): one write per turn. */
  private readonly turn = new TurnBytes();
  /** Whether a turn is under way (its end is scheduled, or held by its caller). */
  private turnOpen = false;
  /** A caller ends this turn itself (holdTurn): no immediate is scheduled for it. */
  private held = false;
  /** The replies awaited on `offOn`, read there directly (replies.ts). */
  private replies?: ReplyQueue;
  /** Whether replies are on at the point written so far (a turn's counted publishes). */
  private repliesOn = false;
  /** The last confirmation's token. */
  private tokens = 0;

  constructor(
    private readonly client: Redis,
    /** The bus's reading of a failed command (unavailable, timed out, or a bug). */
    private readonly asError: (err: unknown) => Error,
    /** Longest a reply is waited for (the bus's command timeout). */
    private readonly timeoutMs: number,
    private readonly confirmMs = CONFIRM_MS,
    /** Told why the connection is replaced when its replies were found out of order. */
    private readonly warn: (why: string) => void = () => {},
  ) {
    client.on('ready', () => this.turnOff());
    client.on('error', () => {}); // reconnects on its own; the bus's own connections report outages
    client.on('close', () => this.fail(new BusUnavailableError('cluster bus unavailable: connection closed')));
  }

  /** Starts connecting (and reconnecting: the client's retry strategy) in the background. */
  connect(): void {
    this.client.connect().catch(() => {});
  }

  /** Whether a publish can be written here now (otherwise the caller publishes as usual). */
  get ready(): boolean {
    const s = this.client.stream;
    return this.client.status === 'ready' && this.offOn === s && !s.destroyed && s.writable;
  }

  /** Whether publishOrBounce can be written here now: `ready`, and the server runs its script. */
  get bounceReady(): boolean {
    return this.ready && this.bouncesOn === this.client.stream;
  }

  /**
   * PUBLISH channel (`head` + `payload`): written at once (with this turn's others, in one
   * write), resolved once Redis is known to have read it. Only when `ready`.
   */
  publish(channel: string, head: QuietHead, payload?: Buffer): Promise<void> {
    const t = this.quietTurn();
    this.bytes += this.put(t, publishBefore(channel), head, payload);
    return this.quietPromise();
  }

  /**
   * PUBLISH channel (`head` + `payload`) with Redis' reply: how many subscribers received it.
   * Written with this turn's others, replies on around them. BusTimeoutError if the connection
   * closes or Redis does not answer in time (in doubt: it may have been heard). Only when `ready`.
   */
  publishCounted(channel: string, head: QuietHead, payload?: Buffer): Promise<number> {
    const replies = this.replies;
    if (!replies) return Promise.reject(new BusUnavailableError('cluster bus unavailable: connection not ready'));
    const t = this.turnBytes();
    if (!this.repliesOn) this.repliesOnAt(t, replies);
    this.put(t, publishBefore(channel), head, payload);
    return new Promise<number>((resolve, reject) => replies.push(new Counted(resolve, reject, this.asError)));
  }

  /**
   * PUBLISH channel (`head` + `payload`), or, when nobody is subscribed there, PUBLISH `bounce`
   * on `back` instead: one EVAL, so a message nobody heard still says so, without Redis'
   * reply to every publish (docs/decisions/0225-quiet-requests.md). As `publish` otherwise;
   * only when `bounceReady`.
   */
  publishOrBounce(
    channel: string,
    head: QuietHead,
    payload: Buffer | undefined,
    back: string,
    bounce: QuietHead,
  ): Promise<void> {
    const t = this.quietTurn();
    this.bytes += this.put(t, evalBefore(channel), head, payload);
    t.addBytes(backArgument(back));
    addHead(t, bounce, 0);
    t.addLineEnd();
    return this.quietPromise();
  }

  /** This turn's bytes, replies off from here. */
  private quietTurn(): TurnBytes {
    const t = this.turnBytes();
    if (this.repliesOn) this.repliesOffAt(t);
    return t;
  }

  /** The promise of a command just written with replies off, resolved by a later confirmation. */
  private quietPromise(): Promise<void> {
    const p = new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
    if (this.bytes >= CONFIRM_BYTES) {
      if (!this.soon) {
        this.soon = true;
        setImmediate(confirmNow, this);
      }
    } else this.timer ??= setTimeout(confirmNow, this.confirmMs, this);
    return p;
  }

  /** This turn's bytes, written when the turn ends: the turn's commands leave in one write. */
  private turnBytes(): TurnBytes {
    if (!this.turnOpen) {
      this.turnOpen = true;
      this.turn.socket = this.client.stream;
      if (!this.held) setImmediate(uncork, this);
    }
    return this.turn;
  }

  /**
   * The caller ends this turn itself, with `uncork()` before it returns: commands written until
   * then schedule no end of their own. For a caller that runs in an immediate (NodeOutbox's
   * end of turn): an immediate scheduled from one runs in the loop's next iteration, one
   * iteration more per turn for a write that the caller's uncork() has already made
   * (docs/decisions/0242-a-turn-ended-by-its-caller.md).
   */
  holdTurn(): void {
    this.held = true;
  }

  /** Adds a command up to its bulk string `head` + `payload`, that included; its size. */
  private put(t: TurnBytes, before: Buffer, head: QuietHead, payload: Buffer | undefined): number {
    t.addBytes(before);
    const n = addHead(t, head, payload?.length ?? 0);
    if (payload?.length) t.addPayload(payload);
    t.addLineEnd();
    return n;
  }

  /** Replies off from here (after counted publishes or a confirmation). */
  private repliesOffAt(t: TurnBytes): void {
    t.addBytes(OFF_BYTES);
    this.repliesOn = false;
  }

  /** Replies on from here; their +OK confirms the quiet messages written so far. */
  private repliesOnAt(t: TurnBytes, replies: ReplyQueue): void {
    const batch = this.waiting;
    this.waiting = [];
    this.bytes = 0;
    clearTimeout(this.timer);
    this.timer = undefined;
    const c = new Confirmation(batch, String(++this.tokens));
    t.add(c.command);
    replies.push(c);
    this.repliesOn = true;
  }

  /** @internal Ends the turn (replies off again first): its commands leave in one write. */
  uncork(): void {
    this.held = false;
    if (!this.turnOpen) return;
    this.turnOpen = false;
    const t = this.turn;
    if (this.repliesOn) this.repliesOffAt(t);
    t.flush();
  }

  /** @internal Asks Redis to confirm everything written so far. */
  confirm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.soon = false;
    if (this.waiting.length === 0) return;
    const replies = this.replies;
    if (!this.ready || !replies) {
      const batch = this.waiting;
      this.waiting = [];
      this.bytes = 0;
      return settle(batch, new BusUnavailableError('cluster bus unavailable: connection not ready'));
    }
    // Its +OK comes after every message written before it; replies go off again behind it, in
    // the same write (the turn's, if this turn has commands waiting for its end).
    const t = this.turn;
    if (!this.turnOpen) t.socket = this.client.stream;
    this.repliesOnAt(t, replies);
    this.repliesOffAt(t);
    if (!this.turnOpen) t.flush();
  }

  /** Messages not yet confirmed are treated as unsent: the connection went away. */
  private fail(err: Error): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.soon = false;
    const batch = this.waiting;
    this.waiting = [];
    this.bytes = 0;
    this.offOn = undefined;
    this.turnOpen = false;
    this.turn.discard();
    this.repliesOn = false;
    this.replies?.close(err);
    this.replies = undefined;
    settle(batch, err);
  }

  /**
   * A new connection has replies on. CLIENT REPLY ON and ECHO first, as probes: a server that
   * refuses either (renamed, or denied by an ACL) leaves this connection unused. Every
   * confirmation needs both, and a refused ECHO would read as replies out of order.
   */
  private turnOff(): void {
    const s = this.client.stream;
    // The script too: with replies off, a refused EVAL (an ACL without it) would lose every
    // request silently; such a server gets requests with their replies, on the command connection.
    const bounces = this.client.call('EVAL', BOUNCE, 0, PROBE, '', PROBE, '').then(
      () => true,
      () => false,
    );
    const echoes = this.client.call('ECHO', PROBE).then(
      () => true,
      () => false,
    );
    this.client.call('CLIENT', 'REPLY', 'ON').then(
      async () => {
        const [canBounce, canEcho] = await Promise.all([bounces, echoes]);
        if (!canEcho) return;
        if (this.client.stream !== s || this.client.status !== 'ready' || this.offOn === s) return;
        // ioredis's last command here has been answered: from now on every reply is read here.
        const replies = readRepliesDirectly(s, this.timeoutMs, (why) => this.outOfOrder(s, why));
        if (!replies) return; // ioredis's decoder not found: the connection stays unused
        s.write(OFF);
        this.replies = replies;
        this.offOn = s;
        if (canBounce) this.bouncesOn = s;
      },
      () => {},
    );
  }

  /**
   * Replies that no command here waits for: a command was refused in silence and nothing shows
   * which (docs/decisions/0234-counted-publishes-on-the-quiet-connection.md, amended). The
   * waiting ones have failed; the connection is replaced, and callers use the command
   * connection until the new one is ready.
   */
  private outOfOrder(s: Socket, why: string): void {
    if (this.client.stream !== s) return;
    this.warn(why);
    this.fail(new BusUnavailableError('cluster bus unavailable: replies out of order on the quiet connection'));
    this.client.disconnect(true);
  }

  close(): void {
    this.fail(new BusUnavailableError('cluster bus closed'));
    this.client.disconnect();
  }
}

function settle(batch: Waiter[], err?: Error): void {
  for (const w of batch)
    if (err) w.reject(err);
    else w.resolve();
}
