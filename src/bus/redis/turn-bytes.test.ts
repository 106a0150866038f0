import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TurnBytes } from './turn-bytes.ts';

// A real loopback connection: what the far end reads once the client is gone is what a turn
// wrote; `writes` counts the client's write calls.
async function pair(): Promise<{ client: Socket; writes: () => number; received: () => Promise<Buffer> }> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  const accepted = once(server, 'connection');
  const client = connect(port, '127.0.0.1');
  await once(client, 'connect');
  const [far] = (await accepted) as [Socket];
  const chunks: Buffer[] = [];
  far.on('data', (d: Buffer) => chunks.push(d));
  const farClosed = once(far, 'close');
  let writes = 0;
  const write = client.write.bind(client);
  client.write = ((...a: Parameters<Socket['write']>) => (writes++, write(...a))) as Socket['write'];
  closeLast = () => {
    client.destroy();
    server.close();
  };
  return {
    client,
    writes: () => writes,
    received: async () => {
      client.end();
      await farClosed;
      return Buffer.concat(chunks);
    },
  };
}

let closeLast = () => {};
afterEach(() => closeLast());

describe('TurnBytes', () => {
  it('writes strings and payloads in order as one Buffer, multi-byte text included', async () => {
    const p = await pair();
    const t = new TurnBytes(p.client);
    const payloads = [Buffer.from('{"a":"é"}'), Buffer.alloc(0), Buffer.from([0, 255, 13, 10])];
    const expected: Buffer[] = [];
    t.add('*3\r\n$7\r\nPUBLISH\r\n');
    expected.push(Buffer.from('*3\r\n$7\r\nPUBLISH\r\n'));
    for (const [i, payload] of payloads.entries()) {
      const text = `head ${i} ✓ `;
      t.add(text);
      t.addPayload(payload);
      t.add('\r\n');
      expected.push(Buffer.from(text), payload, Buffer.from('\r\n'));
    }
    t.add('tail ü');
    expected.push(Buffer.from('tail ü'));
    t.flush();
    const got = await p.received();
    expect(got.equals(Buffer.concat(expected))).toBe(true);
    expect(p.writes()).toBe(1);
  });

  it('writes a turn of only text, and large payloads uncopied, in the same order', async () => {
    const p = await pair();
    const big = Buffer.alloc(256 * 1024, 7);
    const t = new TurnBytes(p.client);
    t.add('a');
    t.addPayload(big);
    t.add('b');
    t.addPayload(Buffer.from('c'));
    t.flush();
    const onlyText = new TurnBytes(p.client);
    onlyText.add('d');
    onlyText.add('e');
    onlyText.flush();
    const got = await p.received();
    expect(got.equals(Buffer.concat([Buffer.from('a'), big, Buffer.from('bcde')]))).toBe(true);
  });

  it('never writes over bytes the socket still holds, across turns and slabs', async () => {
    const p = await pair();
    const t = new TurnBytes(p.client);
    // More than the kernel takes at once: the socket keeps later turns' views queued.
    const first = Buffer.alloc(8 * 1024 * 1024, 1);
    t.addPayload(first);
    t.flush();
    expect(p.client.writableLength).toBeGreaterThan(0);
    const expected: Buffer[] = [first];
    for (let turn = 0; turn < 400; turn++) {
      const text = `turn ${turn} ${'é'.repeat(turn % 50)}|`;
      const payload = Buffer.alloc(turn % 7 === 0 ? 20_000 : turn * 3, turn & 0xff);
      t.add(text);
      t.addBulkStart('', turn * 1009);
      t.addPayload(payload);
      t.add('\r\n');
      expected.push(Buffer.from(text), Buffer.from(`$${turn * 1009}\r\n`), payload, Buffer.from('\r\n'));
      t.flush();
    }
    const got = await p.received();
    expect(got.length).toBe(Buffer.concat(expected).length);
    expect(got.equals(Buffer.concat(expected))).toBe(true);
  });

  it('writes a bulk length as Redis reads it: digits without leading zeros', async () => {
    const p = await pair();
    const t = new TurnBytes(p.client);
    const lengths = [0, 1, 9, 10, 99, 100, 65_535, 1_000_000, 536_870_912];
    for (const n of lengths) t.addBulkStart('', n);
    t.flush();
    const got = await p.received();
    expect(got.toString('latin1')).toBe(lengths.map((n) => `$${n}\r\n`).join(''));
  });

  it("writes a bulk string's length from its UTF-8 bytes, when multi-byte text lengthens the line too", async () => {
    const p = await pair();
    const t = new TurnBytes(p.client);
    const cases: [string, number][] = [
      ['ascii', 0],
      ['ascii', 95], // 100 bytes: as guessed
      ['é', 8], // guessed 9, 10 bytes: one digit more
      ['€'.repeat(40), 0], // guessed 40, 120 bytes
      ['✓ ok', 99_990], // guessed 99,994, 99,996 bytes
      ['é'.repeat(5), 99_995], // guessed 100,000, 100,005: same digits
      ['\ud800', 0], // a lone surrogate: 3 bytes (U+FFFD)
    ];
    const expected: Buffer[] = [];
    for (const [text, more] of cases) {
      t.addBytes(Buffer.from('*'));
      const n = t.addBulkStart(text, more);
      const bytes = Buffer.from(text);
      expect(n).toBe(bytes.length + more);
      t.addPayload(Buffer.alloc(more, 0x2e));
      t.addLineEnd();
      expected.push(Buffer.from(`*$${bytes.length + more}\r\n`), bytes, Buffer.alloc(more, 0x2e), Buffer.from('\r\n'));
    }
    t.flush();
    const got = await p.received();
    expect(got.equals(Buffer.concat(expected))).toBe(true);
  });

  it('writes a first part of kept bytes with numbers between them as the same text would, its length counted, across slabs', async () => {
    const p = await pair();
    const t = new TurnBytes(p.client);
    // Short texts (stored byte by byte) and long ones (copied), an empty one, multi-byte bytes.
    const texts = ['m{"v":1,"t":"req","rid":', ',"id":', '', ',"rest":"é ✓ ' + 'x'.repeat(40) + '"}\n'].map((x) =>
      Buffer.from(x),
    );
    const numbers = [0, 7, 10, 99, 65_535, 1_234_567_890, 9_999_999_999];
    const expected: Buffer[] = [];
    // Enough of them (with payloads) to fill the 64 KiB slab more than once.
    for (let round = 0; round < 40; round++)
      for (const [i, n] of numbers.entries()) {
        const more = (round * 7 + i) * 37;
        const ns = [n, numbers[(i + 1) % numbers.length], round];
        const line = Buffer.concat([
          texts[0],
          Buffer.from(`${ns[0]}`),
          texts[1],
          Buffer.from(`${ns[1]}`),
          texts[2],
          Buffer.from(`${ns[2]}`),
          texts[3],
        ]);
        expect(t.addNumberedBulkStart(texts, ns, more)).toBe(line.length + more);
        t.addPayload(Buffer.alloc(more, 0x61 + i));
        t.addLineEnd();
        expected.push(
          Buffer.from(`$${line.length + more}\r\n`),
          line,
          Buffer.alloc(more, 0x61 + i),
          Buffer.from('\r\n'),
        );
        // One number alone, between two texts.
        expect(t.addNumberedBulkStart([texts[1], texts[0]], [n], 0)).toBe(
          texts[1].length + `${n}`.length + texts[0].length,
        );
        t.addLineEnd();
        expected.push(
          Buffer.from(`$${texts[1].length + `${n}`.length + texts[0].length}\r\n`),
          texts[1],
          Buffer.from(`${n}`),
          texts[0],
          Buffer.from('\r\n'),
        );
      }
    t.flush();
    const got = await p.received();
    expect(got.equals(Buffer.concat(expected))).toBe(true);
  });

  it('writes nothing once its socket is destroyed', async () => {
    const p = await pair();
    const t = new TurnBytes(p.client);
    t.add('lost');
    t.addPayload(Buffer.from('x'));
    p.client.destroy();
    expect(() => t.flush()).not.toThrow();
    const got = await p.received();
    expect(got.length).toBe(0);
  });
});
