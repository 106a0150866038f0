import { describe, expect, it } from 'vitest';
import {
  forwardedFrame,
  isJsonText,
  paramsWithCaller,
  readClientRequest,
  RequestMemo,
  requestFrame,
  type ClientRequestBytes,
} from './request-bytes.ts';
import { withCallerContext } from './caller.ts';
import { waitSeconds } from './timeouts.ts';
import type { Scope } from '../store/types.ts';

const parses = (s: string | Buffer) => {
  try {
    JSON.parse(typeof s === 'string' ? s : s.toString('utf8'));
    return true;
  } catch {
    return false;
  }
};

const CASES = [
  '{}',
  ' { "a" : [1, -2.5e+3, 0, true, false, null, "x\\u00e9\\n\\"", {}] } ',
  '[]',
  '"str"',
  '0',
  '-0.0e-0',
  '{"a":1,}',
  '{"a":1',
  '{"a" 1}',
  '[1,]',
  '[,1]',
  '01',
  '1.',
  '.5',
  '-',
  '1e',
  '+1',
  'tru',
  'nul',
  'truex',
  '{"a":"\\x"}',
  '{"a":"\\u12G4"}',
  '{"a":"tab\there"}',
  '{"a":1}{"b":2}',
  '{"a":1} x',
  '{a:1}',
  "{'a':1}",
  '{"a":[1,[2,[3,{"b":{}}]]]}',
  '[[[[]]]',
  '{"a":{"b":[}]}',
  '"\\"',
  '',
  '   ',
  '\ufeff{}',
  '{"a":NaN}',
  '{"a":Infinity}',
  '{"é":"ü"}',
];

describe('isJsonText', () => {
  it('accepts exactly what JSON.parse accepts', () => {
    for (const c of CASES) expect([c, isJsonText(Buffer.from(c))]).toEqual([c, parses(c)]);
  });

  it('nesting deeper than its first stack, then shallow again, reads the same as JSON.parse', () => {
    const deep = (n: number, inner: string) => '[{"a":'.repeat(n) + inner + '}]'.repeat(n);
    for (const c of [
      deep(5_000, '1'),
      deep(5_000, '1') + ']',
      deep(5_000, '[1,{"b":[]}]'),
      '[{"a":'.repeat(3_000) + '1' + '}]'.repeat(2_999) + '}',
      ...CASES,
    ])
      expect([c.slice(0, 40), isJsonText(Buffer.from(c))]).toEqual([c.slice(0, 40), parses(c)]);
  });

  it('never accepts what JSON.parse refuses (mutated requests)', () => {
    const base = Buffer.from(
      '{"jsonrpc":"2.0","id":"a\\"b","method":"tools/call","params":{"name":"x","arguments":{"s":"\\u00e9 ok","n":[1,2.5,-3e2,true,null]}}}',
    );
    let seed = 42;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed % n);
    const alphabet = Buffer.from('{}[]",:\\ 0123456789.eE+-truefalsnux\t\n');
    let accepted = 0;
    for (let k = 0; k < 20_000; k++) {
      const b = Buffer.from(base);
      for (let m = 1 + rand(3); m > 0; m--) b[rand(b.length)] = alphabet[rand(alphabet.length)];
      const ok = isJsonText(b);
      expect(ok, b.toString()).toBe(parses(b));
      if (ok) accepted++;
    }
    expect(accepted).toBeGreaterThan(100); // the mutations also produced valid texts
  });
});

describe('readClientRequest', () => {
  const token = { id: 'key_1', scopes: ['devices:read', 'devices:act'] as Scope[] };
  const caller = Buffer.from(JSON.stringify({ credential: token.id, scopes: [...token.scopes] }));

  it('reads wait_for_events timeout_ms as seconds, the longer of the two when both come', () => {
    const read = (args: Record<string, unknown>, name = 'wait_for_events') =>
      readClientRequest(
        Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } })),
      )!.timeoutS;
    expect(read({ timeout_ms: 2500 })).toBe(2.5);
    expect(read({ timeout_ms: 2500, timeout_s: 4 })).toBe(4);
    expect(read({ timeout_s: 1, timeout_ms: 9000 })).toBe(9);
    expect(read({ timeout_ms: '9000' })).toBeUndefined();
    expect(read({ timeout_ms: 9000 }, 'tap')).toBeUndefined();
    // A duplicate member is left to the full parse, as for timeout_s.
    const dup =
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait_for_events","arguments":{"timeout_ms":1,"timeout_ms":2}}}';
    expect(readClientRequest(Buffer.from(dup))).toBeUndefined();
  });

  it('reads id, method, tool name and timeout_s, and builds the frame the object path builds', () => {
    for (const body of [
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hé "q"' } } },
      { jsonrpc: '2.0', id: 'x"y', method: 'tools/list' },
      { jsonrpc: '2.0', id: -3, method: 'resources/read', params: {} },
      {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'wait_for_events', arguments: { timeout_s: 45.5 } },
      },
      { id: 2.5e3, params: { arguments: [1], name: 'n' }, method: 'tools/call', extra: true, jsonrpc: '2.0' },
    ]) {
      const text = JSON.stringify(body, null, body.id === -3 ? 2 : undefined);
      const r = readClientRequest(Buffer.from(text))!;
      expect(r).toBeDefined();
      expect(r.id).toEqual(body.id);
      expect(r.method).toEqual(body.method);
      const params = body.params as Record<string, unknown> | undefined;
      expect(r.toolName).toEqual(params?.name);
      expect(r.timeoutS).toEqual(
        params?.name === 'wait_for_events' ? (params.arguments as { timeout_s: number }).timeout_s : undefined,
      );
      const frame = requestFrame(r, 42, caller);
      expect(JSON.parse(frame.toString())).toEqual({
        jsonrpc: '2.0',
        id: 42,
        method: body.method,
        params: withCallerContext(params, token),
      });
      // Across nodes (docs/decisions/0134-cross-node-bytes.md): the params an older node
      // would parse, and the frame a newer one builds from them without a parse.
      const carried = paramsWithCaller(r, caller);
      expect(JSON.parse(carried.toString())).toEqual(withCallerContext(params, token));
      expect(forwardedFrame(42, r.method, carried).equals(frame)).toBe(true);
    }
  });

  it('writes every relay id in decimal, from 0 to the largest safe integer', () => {
    const r = readClientRequest(Buffer.from('{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"é"}}'))!;
    const carried = paramsWithCaller(r, caller);
    for (const id of [0, 7, 9, 10, 99, 100, 123456, 999_999_999, 2 ** 32, Number.MAX_SAFE_INTEGER]) {
      const frame = requestFrame(r, id, caller);
      expect(JSON.parse(frame.toString())).toMatchObject({ id, method: 'tools/call' });
      expect(frame.toString()).toContain(`"id":${id},`);
      expect(forwardedFrame(id, r.method, carried).equals(frame)).toBe(true);
    }
  });

  it('reads what a full parse reads, or leaves the request to it (mutated requests)', () => {
    // What the general path makes of a body: JSON.parse, the last of duplicate members winning.
    const reference = (text: string) => {
      const v = JSON.parse(text) as Record<string, unknown>;
      const params = v.params as Record<string, unknown> | undefined;
      const args = params?.arguments as Record<string, unknown> | undefined;
      return {
        id: v.id,
        method: v.method,
        toolName: params?.name,
        timeoutS: params?.name === 'wait_for_events' ? waitSeconds(args?.timeout_s, args?.timeout_ms) : undefined,
        frame: { jsonrpc: '2.0', id: 9, method: v.method, params: withCallerContext(params, token) },
      };
    };
    const bases = [
      '{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"tap","arguments":{"x":1,"name":"n","id":2}}}',
      '{"params":{"arguments":{"timeout_ms":2500,"timeout_s":1},"name":"wait_for_events"},"id":"k-1","method":"tools/call","jsonrpc":"2.0"}',
      '{ "jsonrpc" : "2.0" , "id" : -4 , "method" : "resources/read" , "params" : { "uri" : "a\\"b" } }',
    ];
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed % n);
    const alphabet = Buffer.from('{}[]",:\\ 0123456789.eE-_tnmdisaoup');
    let read = 0;
    for (let k = 0; k < 30_000; k++) {
      const b = Buffer.from(bases[k % bases.length]);
      for (let m = 1 + rand(2); m > 0; m--) b[rand(b.length)] = alphabet[rand(alphabet.length)];
      const r = readClientRequest(b);
      if (!r) continue;
      read++;
      const text = b.toString();
      const want = reference(text); // throws, failing the test, if the reader took invalid JSON
      expect({ id: r.id, method: r.method, toolName: r.toolName, timeoutS: r.timeoutS }, text).toEqual({
        id: want.id,
        method: want.method,
        toolName: want.toolName,
        timeoutS: want.timeoutS,
      });
      expect(JSON.parse(requestFrame(r, 9, caller).toString()), text).toEqual(want.frame);
    }
    expect(read).toBeGreaterThan(3_000); // most mutations still make a request the reader takes
  });

  it('leaves a duplicate or escaped member name it reads to the full parse', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait_for_events","arguments":{"timeout\\u005fs":5}}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"timeout_s":5,"timeout_s":1},"name":"wait_for_events"}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{},"arguments":{}}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\\u0061me":"x"}}',
      '{"jsonrpc":"2.0","i\\u0064":1,"method":"ping"}',
      '{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"params":{}}',
    ])
      expect([text, readClientRequest(Buffer.from(text))]).toEqual([text, undefined]);
    // Names that only look alike, and the same names deeper down, are read as any other member.
    const r = readClientRequest(
      Buffer.from(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"timeout_s":3,"o":{"timeout_s":9,"params":{"_meta":1}}},"name":"wait_for_events","names":"x"}}',
      ),
    );
    expect(r).toMatchObject({ id: 1, toolName: 'wait_for_events', timeoutS: 3 });
    // Escaped or duplicate names in another tool's arguments are not the relay's to read.
    const tap = readClientRequest(
      Buffer.from(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tap","arguments":{"timeout_s":1,"timeout_s":2,"t\\u0069meout_ms":3}}}',
      ),
    );
    expect(tap?.toolName).toBe('tap');
    expect(tap?.timeoutS).toBeUndefined();
  });

  it('reads a tool name seen before as the same name, whatever shares its memo slot', () => {
    // Same length, first and last byte (one slot), escapes, non-ASCII, over the memo's 64 bytes.
    const names = ['tap', 'tip', 't\\u0061p', 'top', 'tæp', 'ta\\"p', '', 'x'.repeat(64), 'x'.repeat(65)];
    for (let round = 0; round < 3; round++)
      for (const n of round === 1 ? [...names].reverse() : names) {
        const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${n}"}}`;
        expect(readClientRequest(Buffer.from(text))?.toolName, text).toBe(JSON.parse(text).params.name);
      }
  });

  it('leaves everything else to the full parse', () => {
    for (const text of [
      '[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      '{"jsonrpc":"2.0","id":null,"method":"ping"}',
      '{"jsonrpc":"2.0","id":true,"method":"ping"}',
      '{"jsonrpc":"2.0","id":1e999,"method":"ping"}',
      '{"jsonrpc":"1.0","id":1,"method":"ping"}',
      '{"jsonrpc":"\\u0032.0","id":1,"method":"ping"}',
      '{"jsonrpc":"2.0","id":1,"method":7}',
      '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
      '{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"x"}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"\\u005fmeta":{},"name":"x"}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}',
      '{"jsonrpc":"2.0","id":1,"method":"ping",}',
      '{"jsonrpc":"2.0","id":1,"method":"ping"',
    ])
      expect([text, readClientRequest(Buffer.from(text))]).toEqual([text, undefined]);
    // Invalid UTF-8 is replaced by the full parse, never forwarded as is.
    const bad = Buffer.concat([
      Buffer.from('{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"'),
      Buffer.from([0xff]),
      Buffer.from('"}}'),
    ]);
    expect(readClientRequest(bad)).toBeUndefined();
  });
});

describe('RequestMemo', () => {
  // Layouts clients write: the Python SDK's order, the TypeScript SDK's (id last), no params,
  // wait_for_events, whitespace.
  const layouts = [
    (id: string) =>
      `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
    (id: string) => `{"method":"tools/call","params":{"name":"screenshot","arguments":{}},"jsonrpc":"2.0","id":${id}}`,
    (id: string) => `{"jsonrpc":"2.0","id":${id},"method":"ping"}`,
    (id: string) =>
      `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"wait_for_events","arguments":{"timeout_ms":2500}}}`,
    (id: string) => `{ "jsonrpc" : "2.0" , "id" : ${id} , "method" : "tools/list" , "params" : { } }`,
  ];
  const ids = [
    '17',
    '0',
    '-0',
    '-12',
    '9',
    '10',
    '123456789012345',
    '1234567890123456',
    '007',
    '1.5',
    '1e3',
    '"17"',
    ' 17',
    '',
    '1x',
  ];

  it('reads a body as the full read does, whatever the last one was', () => {
    const memo = new RequestMemo();
    let seed = 11;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed % n);
    const alphabet = Buffer.from('{}[]",:\\ 0123456789.eE-_tnmdisaoup');
    let read = 0;
    for (let k = 0; k < 12_000; k++) {
      const b = Buffer.from(layouts[rand(layouts.length)](ids[rand(ids.length)]));
      // One body in three mutated: a compare must fail on any changed byte, head or tail.
      if (rand(3) === 0) b[rand(b.length)] = alphabet[rand(alphabet.length)];
      const text = b.toString();
      const want = readClientRequest(b);
      const got = readClientRequest(b, memo);
      expect(got, text).toEqual(want);
      if (got) {
        read++;
        expect(JSON.parse(requestFrame(got, 9, Buffer.from('{}')).toString()), text).toMatchObject({ id: 9 });
      }
    }
    expect(read).toBeGreaterThan(5_000);
  });

  it('reads a repeat with any one byte changed as the full read does', () => {
    for (const layout of layouts) {
      const base = Buffer.from(layout('18'));
      for (let at = 0; at < base.length; at++)
        for (const c of Buffer.from(' ,:}]"0a\\')) {
          const memo = new RequestMemo();
          readClientRequest(Buffer.from(layout('17')), memo);
          const b = Buffer.from(base);
          b[at] = c;
          expect(readClientRequest(b, memo), b.toString()).toEqual(readClientRequest(b));
        }
    }
  });

  it('reads a repeat from the memo: another integer id between the same bytes', () => {
    for (const [i, layout] of layouts.entries()) {
      const memo = new RequestMemo();
      const first = readClientRequest(Buffer.from(layout('5')), memo)!;
      // What the memo holds is what a repeat is read as (the body is not scanned again).
      memo.method = 'marked';
      const again = readClientRequest(Buffer.from(layout('123456')), memo)!;
      expect(again).toEqual({
        ...first,
        id: 123456,
        method: 'marked',
        body: Buffer.from(layout('123456')),
        ...shifted(first, again),
      });
      // A body that is not a repeat is read in full; one such between repeats leaves the memo.
      const other = layouts[(i + 1) % layouts.length];
      expect(readClientRequest(Buffer.from(layout('"s"')), memo)!.method).not.toBe('marked');
      expect(readClientRequest(Buffer.from(layout('6')), memo)!.method).toBe('marked');
      expect(readClientRequest(Buffer.from(other('8')), memo)!.method).not.toBe('marked');
      expect(readClientRequest(Buffer.from(layout('6')), memo)!.method).toBe('marked');
      // Two in a row: the second is kept in its place.
      readClientRequest(Buffer.from(other('8')), memo);
      readClientRequest(Buffer.from(other('9')), memo);
      expect(readClientRequest(Buffer.from(layout('6')), memo)!.method).not.toBe('marked');
      const kept = readClientRequest(Buffer.from(other('10')), memo)!;
      expect(kept).toEqual({ ...readClientRequest(Buffer.from(other('10')))! });
    }
  });

  it("keeps an agent's repeat through the other requests of its loop", () => {
    const memo = new RequestMemo();
    const screen = (id: number) =>
      Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"screen","arguments":{}}}`);
    const tap = (id: number) =>
      Buffer.from(
        `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"tap","arguments":{"x":${id},"y":${id * 3}}}}`,
      );
    readClientRequest(screen(1), memo);
    memo.toolName = 'marked';
    for (let id = 2; id < 40; id += 2) {
      expect(readClientRequest(tap(id), memo)!.toolName).toBe('tap');
      expect(readClientRequest(screen(id + 1), memo)!.toolName, `screen ${id + 1}`).toBe('marked');
    }
  });

  it('never reads a string id, a long body or an id that is not an integer from the memo', () => {
    const long = (id: string) =>
      `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"type","arguments":{"text":"${'x'.repeat(600)}"}}}`;
    for (const [layout, first, next] of [
      [layouts[0], '"a"', '"b"'],
      [long, '1', '2'],
      [layouts[0], '1e3', '2e3'],
    ] as const) {
      const memo = new RequestMemo();
      readClientRequest(Buffer.from(layout(first)), memo);
      memo.method = 'marked';
      const r = readClientRequest(Buffer.from(layout(next)), memo)!;
      expect(r.method, next).toBe('tools/call');
    }
  });
});

/** A repeat's spans: those after its id move with the id's length, those before it stay. */
function shifted(first: ClientRequestBytes, again: ClientRequestBytes) {
  const d = again.body.length - first.body.length;
  const idAt = first.body.indexOf(String(first.id), first.body.indexOf('"id"'));
  const move = (at: number) => (at > idAt ? at + d : at);
  return {
    methodStart: move(first.methodStart),
    methodEnd: move(first.methodEnd),
    paramsStart: first.paramsStart < 0 ? -1 : move(first.paramsStart),
    paramsEnd: first.paramsStart < 0 ? -1 : move(first.paramsEnd),
  };
}
