import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  frameEnd,
  messageAt,
  OWN_READ_BYTES,
  PushReader,
  readBefore,
  readIntoOwnBuffer,
  type MessageAt,
} from './push-reader.ts';
import { waitFor } from './test-support.ts';
import { scheduleWrite } from '../../turn-writes.ts';

const bulk = (s: string | Buffer) => {
  const b = Buffer.from(s);
  return Buffer.concat([Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n')]);
};
const push = (kind: string, channel: string | Buffer, payload: string | Buffer, type = '>') =>
  Buffer.concat([Buffer.from(`${type}3\r\n`), bulk(kind), bulk(channel), bulk(payload)]);

/** A stream as a subscriber connection sees one: messages between replies ioredis waits for. */
const frames: Array<{ bytes: Buffer; message?: [string, string] }> = [
  { bytes: Buffer.from('>3\r\n$9\r\nsubscribe\r\n$6\r\nch:one\r\n:1\r\n') },
  {
    bytes: push('message', 'ch:one', 'm{"v":1,"t":"res","rid":7}\n{"id":1}'),
    message: ['ch:one', 'm{"v":1,"t":"res","rid":7}\n{"id":1}'],
  },
  { bytes: push('smessage', 'ch:{n}', 'x\r\ny'), message: ['ch:{n}', 'x\r\ny'] },
  { bytes: push('message', 'ch:two', '', '*'), message: ['ch:two', ''] },
  { bytes: Buffer.from('+PONG\r\n') },
  { bytes: Buffer.from('-ERR unknown command\r\n') },
  { bytes: Buffer.from('*2\r\n$4\r\npong\r\n$0\r\n\r\n') },
  { bytes: Buffer.from('%2\r\n+a\r\n:1\r\n+b\r\n*2\r\n$-1\r\n_\r\n') },
  { bytes: Buffer.from('|1\r\n+ttl\r\n:3\r\n+OK\r\n') },
  { bytes: Buffer.from('>3\r\n$11\r\nunsubscribe\r\n$6\r\nch:one\r\n:0\r\n') },
  { bytes: push('message', 'ch:big', 'z'.repeat(70_000)), message: ['ch:big', 'z'.repeat(70_000)] },
];
const stream = Buffer.concat(frames.map((f) => f.bytes));

function feed(chunks: Buffer[]) {
  const messages: Array<[string, string]> = [];
  const other: Buffer[] = [];
  const r = new PushReader(
    (b, at) =>
      messages.push([
        b.toString('utf8', at.channelStart, at.channelEnd),
        b.toString('utf8', at.payloadStart, at.payloadEnd),
      ]),
    (b) => other.push(Buffer.from(b)),
  );
  for (const c of chunks) r.write(c);
  return { messages, other: Buffer.concat(other) };
}

describe('frameEnd', () => {
  it('finds the end of every RESP2 and RESP3 frame, and how much more an unfinished one needs', () => {
    let i = 0;
    for (const f of frames) {
      expect(frameEnd(stream, i)).toBe(i + f.bytes.length);
      i += f.bytes.length;
    }
    const big = frames[frames.length - 1].bytes;
    // The bulk string's length is known once its header is in: the whole frame is asked for.
    expect(frameEnd(big.subarray(0, 100), 0)).toBe(-big.length);
    expect(frameEnd(Buffer.from('$5\r\nab'), 0)).toBe(-11);
    expect(frameEnd(Buffer.from(':12'), 0)).toBe(-4);
  });

  it('throws on bytes that start no frame', () => {
    expect(() => frameEnd(Buffer.from('hello\r\n'), 0)).toThrow(/not a RESP frame/);
  });
});

describe('messageAt', () => {
  const at: MessageAt = { channelStart: 0, channelEnd: 0, payloadStart: 0, payloadEnd: 0 };
  const fields = (b: Buffer) => [
    b.toString('utf8', at.channelStart, at.channelEnd),
    b.toString('utf8', at.payloadStart, at.payloadEnd),
  ];

  it('finds message and smessage pushes and their fields', () => {
    for (const [kind, type] of [
      ['message', '>'],
      ['smessage', '>'],
      ['message', '*'],
    ]) {
      const b = Buffer.concat([Buffer.from('+OK\r\n'), push(kind, 'ch', 'pay\r\nload', type)]);
      expect(messageAt(b, 5, at)).toBe(b.length);
      expect(fields(b)).toEqual(['ch', 'pay\r\nload']);
    }
  });

  it('is 0 for every other frame, also three-element ones', () => {
    for (const s of [
      '>3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n',
      '*3\r\n$8\r\npmessage\r\n$1\r\np\r\n$1\r\nc\r\n',
      '*3\r\n$7\r\nmessage\r\n$-1\r\n$1\r\nc\r\n',
      '*2\r\n$4\r\npong\r\n$0\r\n\r\n',
      ':3\r\n',
    ])
      expect(messageAt(Buffer.from(s), 0, at)).toBe(0);
  });

  it('asks for more bytes for a message cut short, wherever the cut is', () => {
    const b = push('message', 'ch', 'payload');
    for (let cut = 1; cut < b.length; cut++) {
      const need = -messageAt(b.subarray(0, cut), 0, at);
      expect(need).toBeGreaterThan(cut);
      expect(need).toBeLessThanOrEqual(b.length);
    }
  });
});

describe('PushReader', () => {
  const wantMessages = frames.filter((f) => f.message).map((f) => f.message);
  const wantOther = Buffer.concat(frames.filter((f) => !f.message).map((f) => f.bytes));

  it('passes messages on and every other frame whole, in one chunk', () => {
    const { messages, other } = feed([stream]);
    expect(messages).toEqual(wantMessages);
    expect(other.equals(wantOther)).toBe(true);
  });

  it('gives the same, whichever byte a read ends at', () => {
    const small = stream.subarray(0, stream.length - frames[frames.length - 1].bytes.length);
    const smallMessages = wantMessages.slice(0, -1);
    for (let cut = 1; cut < small.length; cut++) {
      const { messages, other } = feed([small.subarray(0, cut), small.subarray(cut)]);
      expect(messages).toEqual(smallMessages);
      expect(other.equals(wantOther)).toBe(true);
    }
  });

  it('hands the other decoder only whole frames', () => {
    const seen: Buffer[] = [];
    const r = new PushReader(
      () => {},
      (b) => seen.push(Buffer.from(b)),
    );
    for (let i = 0; i < stream.length; i += 3) r.write(stream.subarray(i, i + 3));
    for (const b of seen) {
      let i = 0;
      while (i < b.length) i = frameEnd(b, i);
      expect(i).toBe(b.length);
    }
    expect(Buffer.concat(seen).equals(wantOther)).toBe(true);
  });

  it('gathers a large message read in many small chunks', () => {
    const chunks: Buffer[] = [];
    for (let i = 0; i < stream.length; i += 1024) chunks.push(stream.subarray(i, i + 1024));
    expect(feed(chunks).messages).toEqual(wantMessages);
  });

  it('after bytes that are not RESP, passes everything on for the other decoder to report', () => {
    const bad = Buffer.concat([push('message', 'a', 'b'), Buffer.from('garbage'), push('message', 'c', 'd')]);
    const { messages, other } = feed([bad.subarray(0, 20), bad.subarray(20)]);
    expect(messages).toEqual([['a', 'b']]);
    expect(other.toString()).toBe(Buffer.concat([Buffer.from('garbage'), push('message', 'c', 'd')]).toString());
  });

  it('gives the same for random frames read in random chunks (seeded)', () => {
    let seed = 0x9e3779b9;
    const rand = (n: number) => {
      seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
      return seed % n;
    };
    const text = () => Buffer.from(Array.from({ length: rand(40) }, () => rand(256)));
    const frame = (depth: number): Buffer => {
      switch (rand(depth > 2 ? 5 : 8)) {
        case 0:
          return Buffer.from(`+${'ok'.repeat(rand(3))}\r\n`);
        case 1:
          return Buffer.from(`:${rand(1e6) - 5e5}\r\n`);
        case 2:
          return bulk(text());
        case 3:
          return Buffer.from('$-1\r\n');
        case 4:
          return Buffer.from('-ERR x\r\n');
        default: {
          const n = rand(4);
          // An array, set or push of n frames, or a map of n pairs.
          const [type, count] = [
            ['*', n],
            ['~', n],
            ['>', n],
            ['%', 2 * n],
          ][rand(4)] as [string, number];
          const items = Array.from({ length: count }, () => frame(depth + 1));
          return Buffer.concat([Buffer.from(`${type}${n}\r\n`), ...items]);
        }
      }
    };
    for (let trial = 0; trial < 50; trial++) {
      const parts: Array<{ bytes: Buffer; message?: [string, string] }> = [];
      for (let k = 0; k < 30; k++) {
        if (rand(3) === 0) {
          const [c, p] = [text().toString('latin1'), text().toString('latin1')];
          parts.push({
            bytes: push(
              rand(2) ? 'message' : 'smessage',
              Buffer.from(c, 'latin1'),
              Buffer.from(p, 'latin1'),
              rand(2) ? '>' : '*',
            ),
            message: [c, p],
          });
        } else parts.push({ bytes: frame(0) });
      }
      const all = Buffer.concat(parts.map((x) => x.bytes));
      const chunks: Buffer[] = [];
      for (let i = 0; i < all.length;) {
        const n = 1 + rand(rand(4) ? 16 : 400);
        chunks.push(all.subarray(i, i + n));
        i += n;
      }
      const messages: Array<[string, string]> = [];
      const other: Buffer[] = [];
      const r = new PushReader(
        (b, at) =>
          messages.push([
            b.toString('latin1', at.channelStart, at.channelEnd),
            b.toString('latin1', at.payloadStart, at.payloadEnd),
          ]),
        (b) => other.push(Buffer.from(b)),
      );
      for (const c of chunks) r.write(c);
      expect(messages).toEqual(parts.filter((x) => x.message).map((x) => x.message));
      expect(Buffer.concat(other).equals(Buffer.concat(parts.filter((x) => !x.message).map((x) => x.bytes)))).toBe(
        true,
      );
    }
  });
});

/** A connected TCP pair on 127.0.0.1: `socket` as ioredis's, `peer` as Redis. */
async function socketPair(): Promise<{ socket: Socket; peer: Socket; close: () => void }> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection');
  const socket = connect((server.address() as { port: number }).port, '127.0.0.1');
  await once(socket, 'connect');
  const [peer] = (await accepted) as [Socket];
  return {
    socket,
    peer,
    close: () => {
      socket.destroy();
      peer.destroy();
      server.close();
    },
  };
}

/** `now`: whether the socket is inside its own push of a chunk (its `push` wrapped). */
function whilePushing(socket: Socket): { now: boolean } {
  const state = { now: false };
  const push = socket.push.bind(socket);
  socket.push = (chunk: unknown, encoding?: BufferEncoding) => {
    state.now = true;
    try {
      return push(chunk, encoding);
    } finally {
      state.now = false;
    }
  };
  return state;
}

/** The socket's handle made one that cannot read into a buffer of ours, as a TLS socket's. */
function withoutOwnBuffer(socket: Socket): Socket {
  const handle = (socket as unknown as { _handle: object })._handle;
  Object.defineProperty(handle, 'useUserBuffer', { value: undefined });
  return socket;
}

describe('readBefore on a real socket', () => {
  it('where the socket cannot read into a buffer of ours: puts the reader first and hands it each chunk as it is read, not a tick later through `readable`', async () => {
    const { socket, peer, close } = await socketPair();
    withoutOwnBuffer(socket);
    try {
      const decoded: string[] = [];
      // As ioredis 6 adds its decoder (prependListener: the stream is not told of a `data`
      // listener), on a socket that flows.
      socket.prependListener('data', (chunk: Buffer) => decoded.push(`decoder ${chunk.toString()}`));
      socket.resume();
      // Whether the chunk reaches the reader inside the socket's own push of it (Node's
      // stream read hands it over there when the stream is flowing with a `data` listener).
      const pushing = whilePushing(socket);
      const read: Array<{ chunk: string; duringPush: boolean }> = [];
      expect(
        readBefore(socket, (decoder) => ({
          write(chunk: Buffer) {
            read.push({ chunk: chunk.toString(), duringPush: pushing.now });
            decoder(chunk);
          },
        })),
      ).toBe(true);
      expect(socket.listeners('data')).toHaveLength(1);
      for (const text of ['one', 'two']) {
        peer.write(text);
        await waitFor(() => read.at(-1)?.chunk === text, 2000, `the reader's ${text}`);
      }
      expect(read).toEqual([
        { chunk: 'one', duringPush: true },
        { chunk: 'two', duringPush: true },
      ]);
      expect(decoded).toEqual(['decoder one', 'decoder two']);
    } finally {
      close();
    }
  });

  it('where the socket cannot read into a buffer of ours: schedules no read-more tick per chunk, and reads on after a pause that filled the buffer', async () => {
    const { socket, peer, close } = await socketPair();
    withoutOwnBuffer(socket);
    const nextTick = Object.getOwnPropertyDescriptor(process, 'nextTick')!;
    const schedule = process.nextTick.bind(process);
    try {
      socket.prependListener('data', () => {});
      socket.resume();
      // The ticks each chunk's push schedules for the stream's read-more (maybeReadMore_).
      let readMores = 0;
      const pushing = whilePushing(socket);
      process.nextTick = ((fn: (...a: unknown[]) => void, ...args: unknown[]) => {
        if (pushing.now && fn.name === 'maybeReadMore_') readMores++;
        schedule(fn, ...args);
      }) as typeof process.nextTick;
      let bytes = 0;
      const got = (n: number) => waitFor(() => bytes === n, 5000, `${n} bytes`);
      socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
      // Before the reader: each chunk schedules one (what the reader saves).
      peer.write('zero');
      await got(4);
      await new Promise((r) => setImmediate(r));
      expect(readMores).toBeGreaterThan(0);
      socket.removeAllListeners('data');
      socket.prependListener('data', () => {});
      readMores = 0;
      bytes = 0;
      readBefore(socket, () => ({ write: (chunk: Buffer) => void (bytes += chunk.length) }));
      for (const text of ['one', 'two']) {
        const before = bytes;
        peer.write(text);
        await got(before + text.length);
        await new Promise((r) => setImmediate(r));
      }
      expect(readMores).toBe(0);
      // Paused with more than the stream's high-water mark written: the socket stops reading its
      // handle; resumed, it starts again and the reader gets every byte.
      socket.pause();
      const big = Buffer.alloc(1024 * 1024, 0x61);
      peer.write(big);
      await new Promise((r) => setTimeout(r, 100));
      expect(socket.readableLength).toBeGreaterThanOrEqual(socket.readableHighWaterMark);
      socket.resume();
      await got(6 + big.length);
      peer.write('end');
      await got(6 + big.length + 3);
    } finally {
      Object.defineProperty(process, 'nextTick', nextTick);
      close();
    }
  });

  it.each([
    ['reading into a buffer of ours', (socket: Socket) => socket],
    ['as the first `data` listener', withoutOwnBuffer],
  ])('%s, calls any other `data` listener after the reader, a `once` once', async (_, as) => {
    const { socket, peer, close } = await socketPair();
    as(socket);
    try {
      const seen: string[] = [];
      socket.prependListener('data', (chunk: Buffer) => seen.push(`decoder ${chunk.toString()}`));
      socket.once('data', (chunk: Buffer) => seen.push(`once ${chunk.toString()}`));
      readBefore(socket, (decoder) => ({
        write(chunk: Buffer) {
          seen.push(`reader ${chunk.toString()}`);
          decoder(chunk);
        },
      }));
      for (const text of ['one', 'two']) {
        peer.write(text);
        await waitFor(() => seen.at(-1) === `decoder ${text}` || seen.at(-1) === `once ${text}`, 2000, text);
      }
      expect(seen).toEqual(['reader one', 'decoder one', 'once one', 'reader two', 'decoder two']);
      // A listener added later gets the chunks too, after the reader.
      socket.on('data', (chunk: Buffer) => seen.push(`later ${chunk.toString()}`));
      peer.write('three');
      await waitFor(() => seen.at(-1) === 'later three', 2000, 'three');
      expect(seen.slice(5)).toEqual(['reader three', 'decoder three', 'later three']);
    } finally {
      close();
    }
  });

  it.each([
    ['reading into a buffer of ours', 'when the read returns', 1, (socket: Socket) => socket],
    ['as the first `data` listener', 'in the check phase', 0, withoutOwnBuffer],
  ])('%s, writes the turn writes the reader queued %s', async (_, _when, writtenAtMicrotask, as) => {
    const { socket, peer, close } = await socketPair();
    as(socket);
    try {
      const writes: string[] = [];
      // What had been written when a microtask queued by the reader ran: after the read's
      // callback, before the check phase.
      const atMicrotask: number[] = [];
      socket.prependListener('data', () => {});
      socket.resume();
      readBefore(socket, () => ({
        write(chunk: Buffer) {
          scheduleWrite({ writeQueued: () => writes.push(chunk.toString()) });
          queueMicrotask(() => atMicrotask.push(writes.length));
        },
      }));
      peer.write('answer');
      await waitFor(() => writes.length === 1, 2000, 'the write');
      expect(writes).toEqual(['answer']);
      expect(atMicrotask).toEqual([writtenAtMicrotask]);
    } finally {
      close();
    }
  });

  it('where the socket can, reads into one buffer of ours: each chunk its own copy, no `data` event from the stream', async () => {
    const { socket, peer, close } = await socketPair();
    try {
      socket.prependListener('data', () => {});
      socket.resume();
      let pushes = 0;
      const push = socket.push.bind(socket);
      socket.push = (chunk: unknown, encoding?: BufferEncoding) => {
        pushes++;
        return push(chunk, encoding);
      };
      const chunks: Buffer[] = [];
      let bytes = 0;
      expect(
        readBefore(socket, () => ({
          write(chunk: Buffer) {
            chunks.push(chunk);
            bytes += chunk.length;
          },
        })),
      ).toBe(true);
      expect(socket.listeners('data')).toHaveLength(0);
      // Writes one at a time (each its own read, into the same buffer), then one larger than a
      // read: were a chunk a view of the buffer read into, the later reads would overwrite the
      // earlier chunks' bytes.
      const sent: Buffer[] = [];
      for (let i = 0; i < 20; i++) {
        const b = Buffer.from(`write ${i} `.repeat(i + 1));
        sent.push(b);
        peer.write(b);
        const want = bytes + b.length;
        await waitFor(() => bytes === want, 2000, `write ${i}`);
      }
      const big = Buffer.alloc(3 * OWN_READ_BYTES + 123);
      for (let i = 0; i < big.length; i++) big[i] = (i * 7 + 3) & 0xff;
      sent.push(big);
      peer.write(big);
      const total = Buffer.concat(sent).length;
      await waitFor(() => bytes === total, 5000, 'the large write');
      expect(Buffer.concat(chunks).equals(Buffer.concat(sent))).toBe(true);
      expect(chunks.length).toBeGreaterThanOrEqual(24);
      expect(Math.max(...chunks.map((c) => c.length))).toBeLessThanOrEqual(OWN_READ_BYTES);
      expect(pushes).toBe(0);
      // The end still reaches the socket's listeners.
      const ended = once(socket, 'end');
      peer.end();
      await ended;
    } finally {
      close();
    }
  });

  it('leaves a socket as it is where its stream holds bytes not read yet, or it reads into a buffer already', async () => {
    const { socket, peer, close } = await socketPair();
    try {
      socket.pause();
      peer.write('waiting');
      await waitFor(() => socket.readableLength > 0, 2000, 'bytes in the stream');
      expect(readIntoOwnBuffer(socket, () => {})).toBe(false);
      expect(socket.read()?.toString()).toBe('waiting');
      const got: string[] = [];
      expect(readIntoOwnBuffer(socket, (c) => got.push(c.toString()))).toBe(true);
      expect(readIntoOwnBuffer(socket, () => got.push('second'))).toBe(false);
      socket.resume();
      peer.write('next');
      await waitFor(() => got.length > 0, 2000, 'next');
      expect(got).toEqual(['next']);
    } finally {
      close();
    }
  });
});
