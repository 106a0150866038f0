import { describe, expect, it } from 'vitest';
import { decodeNodeMessage, nodeHeaderLine, reqHeaderLine } from './formats.ts';
import { readReqHeader, reqLineEnd, writeReqHeaderLine, type ReqHeader } from './req-header.ts';

// Headers as the router builds them (router.ts `send`): its members in its order.
function header(o: Partial<ReqHeader> & { id: string | number }): ReqHeader {
  const h: ReqHeader = {
    t: 'req',
    rid: o.rid ?? 7,
    id: o.id,
    timeoutMs: o.timeoutMs ?? 30_000,
    from: o.from ?? 'node-1',
    deviceId: o.deviceId ?? 'dev_abc',
    epoch: o.epoch ?? 3,
    method: o.method ?? 'tools/call',
    scopes: o.scopes ?? ['devices:read', 'devices:act'],
    tokenId: o.tokenId,
    tp: o.tp,
  };
  if (o.tst !== undefined) h.tst = o.tst;
  if (o.b) h.b = 1;
  if (o.tn !== undefined) h.tn = o.tn;
  if (o.ts !== undefined) h.ts = o.ts;
  return h;
}

const HEADERS: ReqHeader[] = [
  header({ id: 1 }),
  header({ id: 'a-1', tokenId: 'key_0123', b: 1, tn: 'echo' }),
  header({ id: -5, tokenId: 'key_x', b: 1, tn: 'wait_for_events', ts: 45 }),
  header({ id: 0, b: 1, tn: 'wait_for_events', ts: 2.5 }),
  header({ id: 2 ** 53 - 1, rid: 2 ** 40, epoch: 0, scopes: [] }),
  header({ id: 1.5, timeoutMs: 1 }),
  header({ id: 'q"uote\\back\nline\u0001', tokenId: 'k"', tn: 'é ü 漢 \u2028', b: 1 }),
  header({ id: 'lone \ud800 surrogate', deviceId: 'pair 😀', from: 'n\u007f' }),
  header({ id: 9, tp: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tokenId: 'key_t' }),
  header({ id: 3, scopes: ['a', 'b"c', 'd'] }),
  header({
    id: 10,
    tp: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    tst: 'vendor=abc,other=t61rcWkgMzE',
    b: 1,
    tn: 'echo',
  }),
  header({ id: 4, ts: Number.NaN, tn: 'x', b: 1 }),
];

describe('the request header written and read by hand', () => {
  it('writes the bytes JSON.stringify writes', () => {
    for (const h of HEADERS) expect(reqHeaderLine(h)).toBe(nodeHeaderLine(h));
    // One scopes array written twice, changed in place between: the second line has the change.
    const h = header({ id: 5, scopes: ['devices:read'] });
    expect(reqHeaderLine(h)).toBe(nodeHeaderLine(h));
    (h.scopes as string[]).push('devices:act');
    expect(reqHeaderLine(h)).toBe(nodeHeaderLine(h));
  });

  it('reads what JSON.parse reads, members in the same order', () => {
    for (const h of HEADERS) {
      const line = nodeHeaderLine(h);
      const m = decodeNodeMessage<{ t: string }>(Buffer.from(`${line}{"p":1}`));
      expect(JSON.stringify(m.header)).toBe(JSON.stringify(JSON.parse(line)));
      expect(m.header).toEqual(JSON.parse(line));
      expect(m.payload.toString()).toBe('{"p":1}');
    }
  });

  it('reads a message where it lies: from its start to its end, in a buffer that holds more', () => {
    for (const h of HEADERS) {
      const line = nodeHeaderLine(h);
      const bytes = Buffer.from(`{"v":1,"t":"rel","rid":9}\n${line}{"p":1}\n${line}`);
      const start = bytes.indexOf(0x0a) + 1;
      const end = start + Buffer.byteLength(line) + 7;
      const m = decodeNodeMessage<{ t: string }>(bytes, start, end);
      expect(m.header).toEqual(JSON.parse(line));
      expect(m.payload.toString()).toBe('{"p":1}\n'.slice(0, 7));
      // An answer's header the same way; a message cut inside its header line: no header.
      const answer = decodeNodeMessage<{ t: string }>(bytes, 0, start);
      expect([answer.header, answer.payload.length]).toEqual([{ v: 1, t: 'rel', rid: 9 }, 0]);
      expect(() => decodeNodeMessage(bytes, start, start + Buffer.byteLength(line) - 2)).toThrow();
      expect(() => decodeNodeMessage(bytes, 0, start - 2)).toThrow();
    }
    const answer = Buffer.from('{"v":1,"t":"res","rid":123456789}\n{}');
    expect(() => decodeNodeMessage(answer, 0, answer.indexOf('}'))).toThrow();
    expect(decodeNodeMessage(answer, 0, answer.length - 2).header).toEqual({ v: 1, t: 'res', rid: 123456789 });
  });

  it('reads and writes each member the same whether it repeats the last one, extends it or shortens it', () => {
    // Each member's memo (the writer's last string, the reader's last bytes) met by a string
    // equal to it, longer with it as a prefix, shorter, escaped and plain again; scopes with the
    // list's own `]` and `,` inside a string.
    const devices = ['dev_abc', 'dev_abc', 'dev_abcd', 'dev_ab', 'dev_"ab', 'dev_ab', ''];
    const scopes = [['a'], ['a'], ['a', 'b'], ['a]', 'b'], ['a]', 'b'], ['a],"b'], ['a'], []];
    const tools = ['echo', 'echo', 'echoes', 'ech', 'ech\\', 'ech'];
    let k = 0;
    for (const deviceId of devices)
      for (const sc of scopes)
        for (const tn of tools) {
          const h = header({
            id: k++,
            deviceId: deviceId.slice(), // equal strings, not always the same object
            from: k % 3 ? 'node-1' : 'node-10',
            scopes: sc,
            tokenId: k % 2 ? 'key_1' : 'key_12',
            method: k % 5 ? 'tools/call' : 'tools/list',
            b: 1,
            tn,
          });
          const line = reqHeaderLine(h);
          expect(line).toBe(nodeHeaderLine(h));
          const m = decodeNodeMessage<{ t: string }>(Buffer.from(line));
          expect(JSON.stringify(m.header)).toBe(JSON.stringify(JSON.parse(line)));
          // Read by hand, not left to JSON.parse, unless a string has an escape.
          const raw = Buffer.from(line);
          const byHand = readReqHeader(raw, line.indexOf(',') + 1, line.length, m.header.v!);
          if (line.includes('\\')) continue;
          expect(byHand, line).toBeDefined();
          expect(JSON.stringify(byHand)).toBe(JSON.stringify(JSON.parse(line)));
        }
  });

  it('writes and reads each run of the header again when any one of its members changes', () => {
    // The writer and the reader keep runs (the writer's start, the context, the tail) with their members:
    // each member changed alone, then back, then the same again; numbers that extend the last
    // (a run ending in a number matches the start of a longer one).
    const base = header({ id: 1, tokenId: 'key_1', b: 1, tn: 'echo', ts: 5 });
    const changes: Array<Partial<ReqHeader>> = [
      { from: 'node-2' },
      { rid: 8 },
      { deviceId: 'dev_abd' },
      { epoch: 4 },
      { epoch: 33 },
      { epoch: 0 },
      { epoch: Number.NaN },
      { id: 'x' },
      { method: 'tools/list' },
      { scopes: ['devices:read'] },
      { tokenId: undefined },
      { tokenId: 'key_2' },
      { timeoutMs: 29_999 },
      { timeoutMs: 300_000 },
      { timeoutMs: Number.NaN },
      { tp: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      { b: undefined },
      { tn: undefined },
      { tn: 'wait_for_events' },
      { ts: undefined },
      { ts: 2.5 },
      { ts: 55 },
      { tn: 'echo', ts: 5, b: undefined },
    ];
    for (const change of changes)
      for (const h of [{ ...base, ...change }, base, base, { ...base, ...change }, { ...base, ...change }]) {
        if (h.tokenId === undefined) delete h.tokenId;
        if (h.b === undefined) delete h.b;
        if (h.tn === undefined) delete h.tn;
        if (h.ts === undefined) delete h.ts;
        const line = reqHeaderLine(h);
        expect(line, JSON.stringify(change)).toBe(nodeHeaderLine(h));
        const byHand = readReqHeader(Buffer.from(line), line.indexOf(',') + 1, line.length, 1);
        if (byHand) expect(reqLineEnd, line).toBe(line.length - 1);
        // Read by hand unless a number is not an integer (NaN is written null; a fraction).
        if (!line.includes('null') && Number.isInteger(h.ts ?? 0)) expect(byHand, line).toBeDefined();
        if (byHand) expect(JSON.stringify(byHand), line).toBe(JSON.stringify(JSON.parse(line)));
      }
    // Another version's head, then this one's again.
    const line = nodeHeaderLine(base);
    expect(writeReqHeaderLine('{"v":9,', base)).toBe(line.replace(/^\{"v":\d+,/, '{"v":9,'));
    expect(reqHeaderLine(base)).toBe(line);
    // A scopes array changed in place between two headers.
    const h = header({ id: 2, scopes: ['a', 'b'] });
    expect(reqHeaderLine(h)).toBe(nodeHeaderLine(h));
    (h.scopes as string[])[1] = 'c';
    expect(reqHeaderLine(h)).toBe(nodeHeaderLine(h));
  });

  it('leaves any other header to JSON.parse (another order, a newer member, a mutation), with the same result', () => {
    const line = nodeHeaderLine(header({ id: 12, tokenId: 'key_1', b: 1, tn: 'tap' })).slice(0, -1);
    const variants = [
      line.replace('"rid":7,', '').replace(/}$/, ',"rid":7}'),
      line.replace(',"from":"node-1"', '').replace('"t":"req",', '"t":"req","from":"node-1",'),
      line.replace('"id":12,"timeoutMs":30000', '"timeoutMs":30000,"id":12'),
      line.replace('}', ',"later":true}'),
      line.replace('"epoch":3', '"epoch":3.0'),
      line.replace('"rid":7', '"rid":07'),
      line.replace('"v":1', '"v":2'),
    ];
    let seed = 11;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed % n);
    const alphabet = '{}[]",:\\ 0123456789.-etrsuaq';
    for (let k = 0; k < 20_000; k++) {
      const b = Buffer.from(line);
      for (let m = 1 + rand(2); m > 0; m--) b[rand(b.length)] = alphabet.charCodeAt(rand(alphabet.length));
      variants.push(b.toString('latin1'));
    }
    // Each read where it lies in a larger buffer, a payload after its line that could end a
    // header (`}` then a line end) and bytes after the message: the header is its line's.
    const at = (v: string) => {
      const bytes = Buffer.from(`{"v":1,"t":"res","rid":5}\n${v}\n{"a":"}"}\n}\nmore`, 'latin1');
      const start = bytes.indexOf('\n') + 1;
      return [bytes, start, bytes.length - 'more'.length] as const;
    };
    let read = 0;
    for (const v of variants) {
      let want: unknown;
      try {
        want = JSON.parse(v);
      } catch {
        expect(() => decodeNodeMessage(...at(v)), v).toThrow();
        continue;
      }
      let got: { header: unknown; payload: Buffer };
      try {
        got = decodeNodeMessage(...at(v));
      } catch {
        continue; // valid JSON that is no readable header (no `t`, an old version): refused, as before
      }
      read++;
      expect(JSON.stringify(got.header), v).toBe(JSON.stringify(want));
      expect(got.payload.toString('latin1'), v).toBe('{"a":"}"}\n}\n');
    }
    expect(read).toBeGreaterThan(1_000);
  });
});
