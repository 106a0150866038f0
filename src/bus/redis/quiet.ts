// Node messages whose sender does not wait for Redis' reply, published on a connection of
// their own whose replies are off (CLIENT REPLY OFF): answers to another node's request (nobody
// needs to know how many heard them, docs/decisions/0142-quiet-answers.md), and requests, which
// go as a script that tells the sender when nobody heard one (publishOrBounce,
// docs/decisions/0225-quiet-requests.md). Redis' reply to each publish would otherwise wake
// this process once per message, an event-loop iteration of its own on a quiet node.
//
// Nothing is lost silently: a message resolves only once a later reply on the same connection
// shows Redis read it — `CLIENT REPLY ON` (answered +OK, replies off again at once), sent at
// most CONFIRM_MS after the first unconfirmed message, or at the end of the turn past
// CONFIRM_BYTES — and rejects with BusUnavailableError if the connection closes first, so the
// caller sends it again exactly as after a publish whose reply never came.
//
// Publishes whose receiver count is wanted (`publishCounted`: a busy turn's requests, every
// sendToNode) go here too, between `CLIENT REPLY ON` and `OFF`, and their replies are read by
// replies.ts instead of ioredis's command queue
// (docs/decisions/0234-counted-publishes-on-the-quiet-connection.md). Once replies are off,
// every command on this connection is written here and its reply read there, in order.
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { busPublish, redisCommand } from '../../metrics.ts';
import { BusTimeoutError, BusUnavailableError } from '../errors.ts';
import { integerReply, okReply, readRepliesDirectly, type Awaited, type ReplyQueue } from './replies.ts';

/** Longest a message waits for its confirmation on a connection that stays up. */
export const CONFIRM_MS = 100;
/** Unconfirmed bytes that ask for a confirmation at the end of the turn instead. */
export const CONFIRM_BYTES = 1 << 20;

const OFF = Buffer.from('*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n');
const ON = Buffer.from('*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n');
// KEYS none; ARGV: channel, message, the sender's own channel, what to tell it if nobody heard.
const BOUNCE = "if redis.call('PUBLISH',ARGV[1],ARGV[2])==0 then redis.call('PUBLISH',ARGV[3],ARGV[4]) end";
const BOUNCE_SCRIPT = `$${BOUNCE.length}\r\n${BOUNCE}\r\n`;
/** A channel nobody listens on, for the script's trial run. */
const PROBE = 'phonebridge:probe';

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

/** `CLIENT REPLY ON`'s +OK: Redis read every quiet message written before it. */
class Confirmation implements Awaited {
  readonly asked = performance.now();
  constructor(private readonly batch: Waiter[]) {}
  reply(b: Buffer, start: number, end: number): void {
    const err = okReply(b, start, end);
    if (err) return settle(this.batch, new BusUnavailableError(`cluster bus unavailable: ${err.message}`));
    if (this.batch.length) busPublish.observeTimes((performance.now() - this.asked) / 1000, this.batch.length);
    settle(this.batch);
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
  reply(b: Buffer, start: number, end: number): void {
    const n = integerReply(b, start, end);
    const seconds = (performance.now() - this.asked) / 1000;
    busPublish.observe(seconds);
    redisCommand.observe(seconds);
    if (typeof n === 'number') this.resolve(n);
    else this.reject(this.asError(n));
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

/** `PUBLISH channel` up to its message, as RESP. */
function publishBefore(channel: string): string {
  return `*3\r\n$7\r\nPUBLISH\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`;
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
  private corked?: Socket;
  /** The replies awaited on `offOn`, read there directly (replies.ts). */
  private replies?: ReplyQueue;
  /** Whether replies are on at the point written so far (a turn's counted publishes). */
  private repliesOn = false;

  constructor(
    private readonly client: Redis,
    /** The bus's reading of a failed command (unavailable, timed out, or a bug). */
    private readonly asError: (err: unknown) => Error,
    /** Longest a reply is waited for (the bus's command timeout). */
    private readonly timeoutMs: number,
    private readonly confirmMs = CONFIRM_MS,
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
  publish(channel: string, head: string, payload?: Buffer): Promise<void> {
    return this.quietly(publishBefore(channel), head, payload, '\r\n');
  }

  /**
   * PUBLISH channel (`head` + `payload`) with Redis' reply: how many subscribers received it.
   * Written with this turn's others, replies on around them. BusTimeoutError if the connection
   * closes or Redis does not answer in time (in doubt: it may have been heard). Only when `ready`.
   */
  publishCounted(channel: string, head: string, payload?: Buffer): Promise<number> {
    const replies = this.replies;
    if (!replies) return Promise.reject(new BusUnavailableError('cluster bus unavailable: connection not ready'));
    const s = this.cork();
    if (!this.repliesOn) this.repliesOnAt(s, replies);
    this.put(s, publishBefore(channel), head, payload, '\r\n');
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
    head: string,
    payload: Buffer | undefined,
    back: string,
    bounce: string,
  ): Promise<void> {
    return this.quietly(
      `*7\r\n$4\r\nEVAL\r\n${BOUNCE_SCRIPT}$1\r\n0\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`,
      head,
      payload,
      `\r\n$${Buffer.byteLength(back)}\r\n${back}\r\n$${Buffer.byteLength(bounce)}\r\n${bounce}\r\n`,
    );
  }

  /** A command with replies off, resolved by a later confirmation. */
  private quietly(before: string, head: string, payload: Buffer | undefined, after: string): Promise<void> {
    const s = this.cork();
    if (this.repliesOn) {
      s.write(OFF);
      this.repliesOn = false;
    }
    this.bytes += this.put(s, before, head, payload, after);
    const p = new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
    if (this.bytes >= CONFIRM_BYTES) {
      if (!this.soon) {
        this.soon = true;
        setImmediate(confirmNow, this);
      }
    } else this.timer ??= setTimeout(confirmNow, this.confirmMs, this);
    return p;
  }

  /** The socket, corked until the end of the turn: the turn's commands leave in one write. */
  private cork(): Socket {
    const s = this.client.stream;
    if (!this.corked) {
      s.cork();
      this.corked = s;
      setImmediate(uncork, this);
    }
    return s;
  }

  /** Writes a command whose last-but-one argument is the bulk string `head` + `payload`; its size. */
  private put(s: Socket, before: string, head: string, payload: Buffer | undefined, after: string): number {
    const n = Buffer.byteLength(head) + (payload?.length ?? 0);
    if (payload?.length) {
      s.write(`${before}$${n}\r\n${head}`);
      s.write(payload);
      s.write(after);
    } else s.write(`${before}$${n}\r\n${head}${after}`);
    return n;
  }

  /** Replies on from here; their +OK confirms the quiet messages written so far. */
  private repliesOnAt(s: Socket, replies: ReplyQueue): void {
    const batch = this.waiting;
    this.waiting = [];
    this.bytes = 0;
    clearTimeout(this.timer);
    this.timer = undefined;
    s.write(ON);
    replies.push(new Confirmation(batch));
    this.repliesOn = true;
  }

  /** @internal Ends the turn's cork (replies off again first): its commands leave in one write. */
  uncork(): void {
    const s = this.corked;
    this.corked = undefined;
    if (!s || s.destroyed) return;
    if (this.repliesOn) {
      s.write(OFF);
      this.repliesOn = false;
    }
    s.uncork();
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
    // the same write (or the turn's, if this turn has corked the socket: corks are counted).
    const s = this.client.stream;
    s.cork();
    this.repliesOnAt(s, replies);
    s.write(OFF);
    this.repliesOn = false;
    s.uncork();
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
    this.corked = undefined;
    this.repliesOn = false;
    this.replies?.close(err);
    this.replies = undefined;
    settle(batch, err);
  }

  /**
   * A new connection has replies on. CLIENT REPLY ON first, as a probe: a server that refuses
   * the command (renamed, or denied by an ACL) leaves this connection unused.
   */
  private turnOff(): void {
    const s = this.client.stream;
    // The script too: with replies off, a refused EVAL (an ACL without it) would lose every
    // request silently; such a server gets requests with their replies, on the command connection.
    const bounces = this.client.call('EVAL', BOUNCE, 0, PROBE, '', PROBE, '').then(
      () => true,
      () => false,
    );
    this.client.call('CLIENT', 'REPLY', 'ON').then(
      async () => {
        const canBounce = await bounces;
        if (this.client.stream !== s || this.client.status !== 'ready' || this.offOn === s) return;
        // ioredis's last command here has been answered: from now on every reply is read here.
        const replies = readRepliesDirectly(s, this.timeoutMs);
        if (!replies) return; // ioredis's decoder not found: the connection stays unused
        s.write(OFF);
        this.replies = replies;
        this.offOn = s;
        if (canBounce) this.bouncesOn = s;
      },
      () => {},
    );
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
