// Node messages whose sender does not act on Redis' reply (an answer to another node's
// request: nobody needs to know how many heard it), published on a connection of their own
// whose replies are off (CLIENT REPLY OFF). Redis' reply to each publish would otherwise wake
// this process once per message, an event-loop iteration of its own on a quiet node
// (docs/decisions/0142-quiet-answers.md).
//
// Nothing is lost silently: a message resolves only once a later reply on the same connection
// shows Redis read it — `CLIENT REPLY ON` (answered +OK, replies off again at once), sent at
// most CONFIRM_MS after the first unconfirmed message, or at the end of the turn past
// CONFIRM_BYTES — and rejects with BusUnavailableError if the connection closes first, so the
// caller sends it again exactly as after a publish whose reply never came.
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { BusUnavailableError } from '../errors.ts';

/** Longest a message waits for its confirmation on a connection that stays up. */
export const CONFIRM_MS = 100;
/** Unconfirmed bytes that ask for a confirmation at the end of the turn instead. */
export const CONFIRM_BYTES = 1 << 20;

const OFF = Buffer.from('*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n');
const CRLF = Buffer.from('\r\n');

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

  /**
   * PUBLISH channel (`head` + `payload`): written at once (with this turn's others, in one
   * write), resolved once Redis is known to have read it. Only when `ready`.
   */
  publish(channel: string, head: string, payload?: Buffer): Promise<void> {
    const s = this.client.stream;
    const headBytes = Buffer.byteLength(head);
    const n = headBytes + (payload?.length ?? 0);
    if (!this.corked) {
      s.cork();
      this.corked = s;
      setImmediate(uncork, this);
    }
    s.write(`*3\r\n$7\r\nPUBLISH\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n$${n}\r\n${head}`);
    if (payload?.length) s.write(payload);
    s.write(CRLF);
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
    this.client.call('CLIENT', 'REPLY', 'ON').then(
      () => settle(batch),
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
    this.client.call('CLIENT', 'REPLY', 'ON').then(
      () => {
        if (this.client.stream !== s || this.client.status !== 'ready') return;
        s.write(OFF);
        this.offOn = s;
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
