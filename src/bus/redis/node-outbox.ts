// How this node's messages to other nodes leave for Redis: which connection each takes, and
// whether it waits for its receiver count. A message whose count decides something (a request:
// a count of 0 proves nobody got it, so it may be routed again) is counted; a reply nobody
// reads the count of is quiet; a turn's first requests go as quiet scripts that bounce back
// when nobody hears them (docs/decisions/0142-quiet-answers.md, 0225-quiet-requests.md,
// 0234-counted-publishes-on-the-quiet-connection.md). Without a quiet connection (a Redis
// Cluster), every message is a PUBLISH through ioredis with its count.
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import { BusTimeoutError } from '../errors.ts';
import type { KeyLayout } from './connector.ts';
import type { NumberedHead, QuietHead, QuietPublisher } from './quiet.ts';
import type { NodeHead } from '../formats.ts';
import type { NumberedLine } from '../numbered-line.ts';
import { keptPerKey } from '../../protocol/json-bytes.ts';
import { busPublish } from '../../metrics.ts';

/** `m`: the first byte of a node message on a node's channel (scripts.ts, "Channels"). */
export const NODE_MESSAGE = 0x6d;

/** `m` + msg + payload, in one allocation. */
function nodeMessage(msg: string, payload: Buffer): Buffer {
  const head = Buffer.byteLength(msg);
  const out = Buffer.allocUnsafe(1 + head + payload.length);
  out[0] = NODE_MESSAGE;
  out.write(msg, 1, 'utf8');
  payload.copy(out, 1 + head);
  return out;
}

/** A publish's receiver count: whether anybody heard it. */
function heard(receivers: number): boolean {
  return receivers > 0;
}

/** A reply's receiver count, which nothing decides on. */
function countNotRead(): void {}

/**
 * Requests of one turn sent without their replies, at most. The script costs Redis about
 * 4.4 µs more per request than a PUBLISH (redis-benchmark, pipelined: 175k EVAL/s against 780k
 * PUBLISH/s), and the replies' wake-up costs this process 20–30 µs on a quiet node
 * (docs/BENCHMARKS.md, "Quiet requests"): past four requests the scripts cost more.
 */
export const QUIET_REQUESTS_PER_TURN = 4;

/** Peers' channels kept at most (`channel`: peers come and go under new ids, a restarted node). */
const MAX_PEER_CHANNELS = 1024;

function sendTurnRequests(outbox: NodeOutbox): void {
  outbox.sendTurnRequests();
}

/** A sendOrBounce request waiting for the end of its turn. */
interface TurnRequest {
  nodeId: string;
  msg: NodeHead;
  payload: Buffer | undefined;
  bounce: NodeHead;
  resolve: (heard: boolean) => void;
  reject: (err: unknown) => void;
}

/** What the outbox needs of the bus's command connection. */
export interface CommandConnection {
  /** PUBLISH through ioredis, among this turn's commands; resolves with the receiver count. */
  publish(channel: string, body: string | Buffer): Promise<number>;
  /** This turn's commands leave now. */
  uncork(): void;
}

export class NodeOutbox {
  /** sendOrBounce requests of this turn, sent together at its end. */
  private turnRequests: TurnRequest[] = [];
  /**
   * A peer's channel, made once per peer: `layout.node` concatenates anew each time, and a
   * fresh concatenation compared with the channel whose RESP bytes are kept (quiet.ts) is
   * flattened first, some 800 instructions a message (docs/BENCHMARKS.md, "Channels made
   * once, the clock read once, header lines as bytes").
   */
  private readonly channel = keptPerKey((nodeId) => this.layout.node(nodeId), MAX_PEER_CHANNELS);
  /** A NumberedLine's texts as bytes, the first with the `m` tag, by its texts' array. */
  private readonly lineBytes = new WeakMap<readonly string[], Buffer[]>();

  constructor(
    private readonly layout: KeyLayout,
    /** This node's channel: where a quiet request bounces to when nobody hears it. */
    private readonly chSelf: string,
    private readonly quiet: QuietPublisher | undefined,
    private readonly commands: CommandConnection,
  ) {}

  /**
   * A node message's head as the quiet connection writes it: `m` + its text, or a NumberedLine
   * as its texts' bytes (kept) and its numbers, no string made
   * (docs/decisions/0263-header-lines-written-as-bytes.md).
   */
  private quietHead(msg: NodeHead): QuietHead {
    if (typeof msg === 'string') return 'm' + msg;
    const numbers = msg.numbers;
    // What the digit writer writes as String(n) would: a non-negative safe integer (anything
    // else, as text).
    for (let i = 0; i < numbers.length; i++) {
      const n = numbers[i];
      if (!(n >= 0 && Number.isSafeInteger(n))) return 'm' + String(msg);
    }
    return { texts: this.bytesOf(msg), numbers } satisfies NumberedHead;
  }

  private bytesOf(line: NumberedLine): Buffer[] {
    let bytes = this.lineBytes.get(line.texts);
    if (bytes === undefined)
      this.lineBytes.set(line.texts, (bytes = line.texts.map((text, i) => Buffer.from(i === 0 ? 'm' + text : text))));
    return bytes;
  }

  /** Whether replies go out without Redis' answers now. */
  get quietReady(): boolean {
    return this.quiet?.ready ?? false;
  }

  sendToNode(nodeId: string, msg: NodeHead, payload?: Buffer): Promise<boolean> {
    // Its receiver count read off the quiet connection, not through ioredis's command queue
    // (docs/decisions/0234-counted-publishes-on-the-quiet-connection.md).
    if (this.quiet?.ready)
      return this.quiet.publishCounted(this.channel(nodeId), this.quietHead(msg), payload).then(heard);
    return this.publishWithReply(nodeId, String(msg), payload);
  }

  /** sendToNode through ioredis, on the command connection. */
  private async publishWithReply(nodeId: string, msg: string, payload?: Buffer): Promise<boolean> {
    const started = performance.now();
    const body = payload === undefined ? 'm' + msg : nodeMessage(msg, payload);
    try {
      return (await this.commands.publish(this.channel(nodeId), body)) > 0;
    } finally {
      busPublish.since(started);
    }
  }

  /** Every answer of a request served here: on the quiet path, no promise of its own. */
  replyToNode(nodeId: string, msg: NodeHead, payload?: Buffer): Promise<void> {
    if (this.quiet?.ready) return this.quiet.publish(this.channel(nodeId), this.quietHead(msg), payload);
    return this.sendToNode(nodeId, msg, payload).then(countNotRead);
  }

  /**
   * A turn's first QUIET_REQUESTS_PER_TURN requests go without Redis' replies (the replies
   * would wake this process for them alone); a busier turn's go with theirs, which arrive
   * together in one read and cost Redis less than a script each
   * (docs/decisions/0225-quiet-requests.md).
   */
  sendOrBounce(nodeId: string, msg: NodeHead, payload: Buffer | undefined, bounce: NodeHead): Promise<boolean> {
    if (!this.quiet?.bounceReady) return this.sendToNode(nodeId, msg, payload);
    return new Promise<boolean>((resolve, reject) => {
      if (this.turnRequests.push({ nodeId, msg, payload, bounce, resolve, reject }) === 1)
        setImmediate(sendTurnRequests, this);
    });
  }

  /**
   * @internal The turn's sendOrBounce requests leave, and the sockets they went to are
   * uncorked. It runs in an immediate: the quiet connection's turn is held and ended here, not
   * by an immediate of its own in the next loop iteration (QuietPublisher.holdTurn).
   */
  sendTurnRequests(): void {
    const batch = this.turnRequests;
    this.turnRequests = [];
    const quiet = this.quiet;
    quiet?.holdTurn();
    try {
      if (batch.length <= QUIET_REQUESTS_PER_TURN && quiet?.bounceReady) {
        for (const r of batch)
          quiet
            .publishOrBounce(
              this.channel(r.nodeId),
              this.quietHead(r.msg),
              r.payload,
              this.chSelf,
              this.quietHead(r.bounce),
            )
            .then(
              () => r.resolve(true),
              // Written, then its connection closed before Redis confirmed it: it may have run (and
              // been heard), so it is in doubt, as a publish whose reply came too late.
              (err: unknown) =>
                r.reject(
                  new BusTimeoutError('cluster bus connection closed before Redis confirmed the message', {
                    cause: err,
                  }),
                ),
            );
        return;
      }
      for (const r of batch) this.sendToNode(r.nodeId, r.msg, r.payload).then(r.resolve, r.reject);
      this.commands.uncork();
    } finally {
      quiet?.uncork();
    }
  }
}
