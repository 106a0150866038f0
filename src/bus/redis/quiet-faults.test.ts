// The quiet connection (quiet.ts, replies.ts, push-reader.ts) against a real Redis that misbehaves:
// replies a byte per read or cut off by a close (through a TCP proxy that can hold and trickle
// what Redis sends back), and commands refused in silence while replies are off (-BUSY during
// another client's long script, on a scratch server); and, through the same proxy, messages to
// several channels in turn.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { BusTimeoutError, BusUnavailableError } from '../errors.ts';
import { QuietPublisher } from './quiet.ts';
import { RedisBus } from './index.ts';
import { quietLog, randomPrefix, ScratchRedis, sleep, waitFor } from './test-support.ts';

const uid = () => randomBytes(4).toString('hex');

/** One proxied connection: client <-> Redis. */
interface Link {
  client: Socket;
  server: Socket;
  /** What the client sent so far (to tell the connections apart). */
  sent: string;
  /** Bytes from Redis not yet passed on while held. */
  heldBack: Buffer[];
  hold: boolean;
  /** Passes Redis' bytes on one at a time, each in a read of its own. */
  trickle: boolean;
  queue: number[];
  pumping: boolean;
}

/** A TCP proxy in front of 127.0.0.1:6379. */
class Proxy {
  readonly links: Link[] = [];
  private server!: Server;
  port = 0;
  trickle = false;

  static async start(): Promise<Proxy> {
    const p = new Proxy();
    p.server = createServer((client) => p.accept(client));
    p.server.listen(0, '127.0.0.1');
    await once(p.server, 'listening');
    p.port = (p.server.address() as { port: number }).port;
    return p;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  private accept(client: Socket): void {
    const server = connect(6379, '127.0.0.1');
    const link: Link = {
      client,
      server,
      sent: '',
      heldBack: [],
      hold: false,
      trickle: this.trickle,
      queue: [],
      pumping: false,
    };
    this.links.push(link);
    client.on('data', (b: Buffer) => {
      if (link.sent.length < 4096) link.sent += b.toString('latin1');
      server.write(b);
    });
    server.on('data', (b: Buffer) => {
      if (link.hold) link.heldBack.push(b);
      else this.pass(link, b);
    });
    const end = () => {
      client.destroy();
      server.destroy();
    };
    client.on('close', end);
    server.on('close', end);
    client.on('error', () => {});
    server.on('error', () => {});
  }

  private pass(link: Link, b: Buffer): void {
    if (!link.trickle) {
      link.client.write(b);
      return;
    }
    // One byte per write, a timer apart: the client reads each on its own.
    link.queue.push(...b);
    if (link.pumping) return;
    link.pumping = true;
    const pump = () => {
      const byte = link.queue.shift();
      if (byte === undefined || link.client.destroyed) {
        link.pumping = false;
        return;
      }
      link.client.write(Buffer.of(byte));
      setTimeout(pump, 1);
    };
    pump();
  }

  /** The link whose client named itself `name` (CLIENT SETNAME). */
  link(name: string): Link {
    const l = this.links.filter((x) => x.sent.includes(name) && !x.client.destroyed).at(-1);
    if (!l) throw new Error(`no link named ${name}`);
    return l;
  }

  release(link: Link): void {
    link.hold = false;
    for (const b of link.heldBack.splice(0)) this.pass(link, b);
  }

  close(): void {
    for (const l of this.links) {
      l.client.destroy();
      l.server.destroy();
    }
    this.server.close();
  }
}

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  // Last in, first out: the scratch servers go after the connections to them.
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A helper connection, closed after the test (quiet about the scratch server going away). */
function helper(url: string): Redis {
  const r = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  cleanup.push(() => r.disconnect());
  return r;
}

function asError(err: unknown): Error {
  if (err instanceof Error && err.name === 'ReplyError') return err;
  return err instanceof BusUnavailableError ? err : new BusUnavailableError(String(err));
}

async function quiet(
  url: string,
  name: string,
  timeoutMs = 1000,
  confirmMs = 100,
  warn?: (why: string) => void,
): Promise<{ q: QuietPublisher; client: Redis }> {
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    connectionName: name,
    commandTimeout: timeoutMs,
    retryStrategy: () => 50,
  });
  const q = new QuietPublisher(client, asError, timeoutMs, confirmMs, warn);
  q.connect();
  cleanup.push(() => q.close());
  await waitFor(() => q.bounceReady, 5000, 'the quiet connection');
  return { q, client };
}

/** A quiet connection through a fresh proxy, and a subscriber on a channel of its own. */
async function proxied(timeoutMs: number, confirmMs?: number, warn?: (why: string) => void) {
  const proxy = await Proxy.start();
  cleanup.push(() => proxy.close());
  const name = `quiet-faults-${uid()}`;
  const { q } = await quiet(proxy.url, name, timeoutMs, confirmMs, warn);
  const ch = `quiet-faults:${uid()}`;
  const got = await listen(ch);
  return { proxy, name, q, ch, got, link: proxy.link(name) };
}

/** A promise's value, or its error. */
const outcome = <T>(p: Promise<T>): Promise<T | Error> =>
  p.then(
    (v) => v,
    (err: Error) => err,
  );

/**
 * Starts another client's script that keeps Redis busy for `ms`, and waits until Redis refuses
 * other clients' commands with -BUSY (past busy-reply-threshold). `ended`: the script's result.
 */
async function busyFor(url: string, ms: number): Promise<{ ended: Promise<unknown> }> {
  const probe = helper(url); // connected before the script, to be answered -BUSY
  await probe.ping();
  const spin = helper(url).eval(
    `local t=redis.call('TIME') local s=t[1]*1e6+t[2] while true do local n=redis.call('TIME') if n[1]*1e6+n[2]-s>${ms * 1000} then break end end return 1`,
    0,
  );
  await waitFor(
    () =>
      probe.ping().then(
        () => false,
        (err: Error) => /^BUSY/.test(err.message),
      ),
    5000,
    'Redis busy with the script',
  );
  return { ended: spin };
}

/** A subscriber on `channel` that records what it hears. */
async function listen(channel: string): Promise<string[]> {
  const sub = new Redis('redis://127.0.0.1:6379');
  cleanup.push(() => sub.disconnect());
  const got: string[] = [];
  sub.on('message', (_c: string, m: string) => got.push(m));
  await sub.subscribe(channel);
  return got;
}

describe('quiet connection, replies a byte per read', () => {
  // The reply reader on a real connection whose replies come a byte per read, each kind of
  // command in one turn.
  it('replies read a byte at a time are matched to their commands', async () => {
    const { q, ch, got, link } = await proxied(5000);
    link.trickle = true;
    const results = await Promise.all([
      q.publish(ch, 'a'),
      q.publishCounted(ch, 'b'),
      q.publishCounted(`${ch}:nobody`, 'c'),
      q.publishOrBounce(ch, 'd', undefined, `${ch}:back`, 'x'),
      q.publishCounted(ch, 'e'),
    ]);
    expect(results).toEqual([undefined, 1, 0, undefined, 1]);
    await waitFor(() => got.length === 4, 2000, 'every message');
    expect(got).toEqual(['a', 'b', 'd', 'e']);
  });
});

describe('quiet connection, messages to channels in turn', () => {
  // The RESP that depends only on a message's channels is kept for the last channel of each
  // kind (quiet.ts): messages to two channels in turn, each kind of command, and bounces to two
  // back channels, in one turn and across turns.
  it('every message reaches its own channel and every bounce its own back channel', async () => {
    const { q, ch, got } = await proxied(5000);
    const other = `${ch}:other`;
    const gotOther = await listen(other);
    const backs = [`${ch}:back1`, `${ch}:back2`];
    const bounced = await Promise.all(backs.map((b) => listen(b)));
    for (let turn = 0; turn < 2; turn++) {
      const results = await Promise.all([
        q.publish(ch, `a${turn}`),
        q.publish(other, `b${turn}`),
        q.publishOrBounce(ch, `c${turn}`, Buffer.from('+payload'), backs[0], `x${turn}`),
        q.publishOrBounce(`${ch}:nobody`, `d${turn}`, undefined, backs[1], `y${turn}`),
        q.publishOrBounce(other, `e${turn}`, undefined, backs[0], `z${turn}`),
        q.publishOrBounce(`${ch}:nobody`, `f${turn}`, undefined, backs[0], `w${turn}`),
        q.publishCounted(other, `g${turn}`),
        q.publishCounted(ch, `h${turn}`),
      ]);
      expect(results).toEqual([undefined, undefined, undefined, undefined, undefined, undefined, 1, 1]);
    }
    await waitFor(() => got.length === 6 && gotOther.length === 6 && bounced[0].length === 2, 2000, 'every message');
    await waitFor(() => bounced[1].length === 2, 2000, 'every bounce');
    expect(got).toEqual(['a0', 'c0+payload', 'h0', 'a1', 'c1+payload', 'h1']);
    expect(gotOther).toEqual(['b0', 'e0', 'g0', 'b1', 'e1', 'g1']);
    expect(bounced).toEqual([
      ['w0', 'w1'],
      ['y0', 'y1'],
    ]);
  });
});

describe('quiet connection, closed with part of a reply read', () => {
  // The connection closes with part of a reply frame held in the reader.
  it('counted publishes and unconfirmed messages settle at once, and the next connection reads its replies from the start', async () => {
    const { q, ch, got, link } = await proxied(10_000, 60_000);
    const quietMsg = outcome(q.publish(ch, 'quiet'));
    link.hold = true;
    const counted = outcome(q.publishCounted(ch, 'counted'));
    await waitFor(() => link.heldBack.length > 0, 2000, "Redis' replies");
    const replies = Buffer.concat(link.heldBack.splice(0));
    // CLIENT REPLY ON's +OK, the confirmation's token, and the count.
    expect(replies.toString()).toMatch(/^\+OK\r\n\$\d+\r\n\d+\r\n:1\r\n$/);
    link.client.write(replies.subarray(0, replies.indexOf(':') + 1)); // up to ':' of the count
    await sleep(50);
    expect(await quietMsg).toBe(undefined); // confirmed by the +OK and the token
    link.client.destroy();
    const err = await counted;
    expect(err).toBeInstanceOf(BusTimeoutError);
    expect((err as Error).message).toMatch(/closed before Redis answered/);
    await waitFor(() => q.ready, 5000, 'the quiet connection back');
    expect(await q.publishCounted(ch, 'next')).toBe(1);
    await waitFor(() => got.length === 3, 2000, 'every message');
    expect(got).toEqual(['quiet', 'counted', 'next']);
  });
});

describe('quiet connection, a reply no command waits for', () => {
  it('fails what waits on it (quiet messages to be sent again, counted ones in doubt) and is replaced by a new connection', async () => {
    const warned: string[] = [];
    const { proxy, name, q, ch, got, link } = await proxied(10_000, 60_000, (why) => warned.push(why));
    const quietMsg = outcome(q.publish(ch, 'quiet'));
    link.hold = true; // Redis' replies to the turn below wait in the proxy
    const counted = outcome(q.publishCounted(ch, 'counted'));
    await waitFor(() => link.heldBack.length > 0, 2000, "Redis' replies");
    // Where the confirmation's +OK is due, an error: what a CLIENT REPLY OFF refused while replies
    // were on (-BUSY) sends. Nothing shows which command it belongs to.
    link.client.write('-BUSY Redis is busy running a script\r\n');
    expect(await quietMsg).toBeInstanceOf(BusUnavailableError); // sent again by its caller
    expect(await counted).toBeInstanceOf(BusTimeoutError); // it ran (it was heard): in doubt
    expect(q.ready).toBe(false);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/-BUSY/);
    await waitFor(() => q.ready, 5000, 'a new quiet connection');
    expect(proxy.links.filter((l) => l.sent.includes(name)).length).toBe(2);
    expect(await q.publishCounted(ch, 'next')).toBe(1);
    await waitFor(() => got.length === 3, 2000, 'every message');
    expect(got).toEqual(['quiet', 'counted', 'next']);
  });
});

describe('quiet connection, commands refused in silence (Redis busy with a long script)', () => {
  it('after commands Redis refused silently (BUSY while replies were off), counted publishes get their own replies again', async () => {
    const redis = await ScratchRedis.start();
    cleanup.push(() => redis.kill());
    const admin = helper(redis.url);
    await admin.config('SET', 'busy-reply-threshold', '50');
    const name = `quiet-faults-${uid()}`;
    const { q } = await quiet(redis.url, name, 300);
    const ch = `quiet-faults:${uid()}`;
    const sub = helper(redis.url);
    const heard: string[] = [];
    sub.on('message', (_c: string, m: string) => heard.push(m));
    await sub.subscribe(ch);
    expect(await q.publishCounted(ch, 'before')).toBe(1);
    // Another client's script keeps Redis busy for 1.5 s: past the threshold, Redis answers every
    // other client's command with -BUSY, and a client whose replies are off with nothing at all:
    // its CLIENT REPLY ON is refused too, so the commands behind it get no reply either.
    const spin = (await busyFor(redis.url, 1500)).ended;
    await expect(q.publishCounted(ch, 'during')).rejects.toBeInstanceOf(BusTimeoutError); // in doubt: fair
    expect(await spin).toBe(1);
    await waitFor(() => q.ready, 5000, 'the quiet connection usable'); // as every caller asks
    // Redis serves again. Two turns of counted publishes: one heard, one to nobody.
    const settled = (p: Promise<number>) =>
      p.then(
        (n) => n,
        (err: Error) => err.name,
      );
    const first = settled(q.publishCounted(ch, 'after 1'));
    await new Promise((r) => setImmediate(r)); // the next in a turn of its own
    const second = settled(q.publishCounted(`${ch}:nobody`, 'after 2'));
    const counts = await Promise.all([first, second]);
    await sleep(50);
    // Redis refused 'during' (it never ran) and ran both of the others...
    expect(heard).toEqual(['before', 'after 1']);
    // ...so each gets its own count. Without the confirmation's token the replies of the turn
    // after the script went to the slots of the refused commands (kept for their "late" replies,
    // which never come): 'after 1', heard, was told 0 (the count of 'after 2'), and 'after 2'
    // timed out, one turn behind until the connection closed.
    expect(counts).toEqual([1, 0]);
  });

  it('through the bus: after a busy script, sendToNode still tells a message nobody heard from one a node heard', async () => {
    const redis = await ScratchRedis.start();
    cleanup.push(() => redis.kill());
    const admin = helper(redis.url);
    await admin.config('SET', 'busy-reply-threshold', '50');
    const prefix = randomPrefix();
    const opts = { prefix, nodeTtlMs: 3000, heartbeatMs: 150, commandTimeoutMs: 300 };
    const [a, b] = await Promise.all([
      RedisBus.connect(redis.url, `a-${uid()}`, quietLog, opts),
      RedisBus.connect(redis.url, `b-${uid()}`, quietLog, opts),
    ]);
    cleanup.push(() => Promise.all([a.close(), b.close()]));
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const atA: string[] = [];
    a.onNodeMessage((m) => atA.push(m));
    const spin = (await busyFor(redis.url, 1500)).ended;
    await expect(b.sendToNode(a.nodeId, 'during')).rejects.toBeInstanceOf(BusTimeoutError); // in doubt: fair
    expect(await spin).toBe(1);
    const settled = (p: Promise<boolean>) =>
      p.then(
        (n) => n,
        (err: Error) => err.name,
      );
    const toNobody = settled(b.sendToNode('nobody', 'unheard'));
    await new Promise((r) => setImmediate(r)); // the next in a turn of its own
    const toA = settled(b.sendToNode(a.nodeId, 'heard'));
    const outcomes = await Promise.all([toNobody, toA]);
    await sleep(50);
    expect(atA).toEqual(['heard']);
    // Without the confirmation's token: [true, 'BusTimeoutError']. The message nobody heard was
    // reported heard (the count of the one after it): the router neither re-routed nor failed it,
    // and the call waited for its deadline.
    expect(outcomes).toEqual([false, true]);
  });
});
