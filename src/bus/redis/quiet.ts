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
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { busPublish } from '../../metrics.ts';
import { BusUnavailableError } from '../errors.ts';

/** Longest a message waits for its confirmation on a connection that stays up. */
export const CONFIRM_MS = 100;
/** Unconfirmed bytes that ask for a confirmation at the end of the turn instead. */
export const CONFIRM_BYTES = 1 << 20;

const OFF = Buffer.from('*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n');
// KEYS none; ARGV: channel, message, the sender's own channel, what to tell it if nobody heard.
const BOUNCE = "if redis.call('PUBLISH',ARGV[1],ARGV[2])==0 then redis.call('PUBLISH',ARGV[3],ARGV[4]) end";
const BOUNCE_SCRIPT = `$${BOUNCE.length}\r\n${BOUNCE}\r\n`;
/** A channel nobody listens on, for the script's trial run. */
const PROBE = 'phonebridge:probe';

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
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

  constructor(
    private readonly client: Redis,
    /** The bus's reading of a failed command (unavailable, timed out, or a bug). */
    private readonly asError: (err: unknown) => Error,
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
    return this.write(`*3\r\n$7\r\nPUBLISH\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`, head, payload, '\r\n');
  }

  /** A command whose last-but-one argument is the bulk string `head` + `payload`: `before` it, `after` it. */
  private write(before: string, head: string, payload: Buffer | undefined, after: string): Promise<void> {
    const s = this.client.stream;
    const n = Buffer.byteLength(head) + (payload?.length ?? 0);
    if (!this.corked) {
      s.cork();
      this.corked = s;
      setImmediate(uncork, this);
    }
    if (payload?.length) {
      s.write(`${before}$${n}\r\n${head}`);
      s.write(payload);
      s.write(after);
    } else s.write(`${before}$${n}\r\n${head}${after}`);
    this.bytes += n;
    const p = new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
    if (this.bytes >= CONFIRM_BYTES) {
      if (!this.soon) {
        this.soon = true;
        setImmediate(confirmNow, this);
      }
    } else this.timer ??= setTimeout(confirmNow, this.confirmMs, this);
    return p;
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
    return this.write(
      `*7\r\n$4\r\nEVAL\r\n${BOUNCE_SCRIPT}$1\r\n0\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`,
      head,
      payload,
      `\r\n$${Buffer.byteLength(back)}\r\n${back}\r\n$${Buffer.byteLength(bounce)}\r\n${bounce}\r\n`,
    );
  }

  /** @internal Ends the turn's cork: its messages leave in one write. */
  uncork(): void {
    const s = this.corked;
    this.corked = undefined;
    if (s && !s.destroyed) s.uncork();
  }

  /** @internal Asks Redis to confirm everything written so far. */
  confirm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.soon = false;
    const batch = this.waiting;
    if (batch.length === 0) return;
    this.waiting = [];
    this.bytes = 0;
    if (!this.ready) return settle(batch, new BusUnavailableError('cluster bus unavailable: connection not ready'));
    const s = this.client.stream;
    if (!this.corked) s.cork();
    // Its +OK comes after every publish written before it; replies go off again behind it,
    // in the same write.
    const asked = performance.now();
    this.client.call('CLIENT', 'REPLY', 'ON').then(
      () => {
        busPublish.observeTimes((performance.now() - asked) / 1000, batch.length);
        settle(batch);
      },
      (err: unknown) => settle(batch, this.asError(err)),
    );
    s.write(OFF);
    if (this.corked) this.uncork();
    else s.uncork();
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
        if (this.client.stream !== s || this.client.status !== 'ready') return;
        s.write(OFF);
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
