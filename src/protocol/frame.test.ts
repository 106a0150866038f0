import { describe, expect, it } from 'vitest';
import { checkedWhole, inspectPhoneFrame, withId, type PhoneFrame } from './frame.ts';

function restore(text: string, id: string | number | null): unknown {
  const f = inspectPhoneFrame(Buffer.from(text));
  if (f.kind !== 'response') throw new Error(`not a response: ${JSON.stringify(f)}`);
  return JSON.parse(withId(Buffer.from(text), f.idStart, f.idEnd, id).toString());
}

describe('inspectPhoneFrame', () => {
  it('finds the id when it is the last member (what the MCP SDK writes)', () => {
    const text = JSON.stringify({
      result: { content: [{ type: 'text', text: 'a "quoted" } id' }] },
      jsonrpc: '2.0',
      id: 42,
    });
    const f = inspectPhoneFrame(Buffer.from(text));
    expect(f).toMatchObject({ kind: 'response', id: 42 });
    expect(restore(text, 'client-7')).toEqual({
      result: { content: [{ type: 'text', text: 'a "quoted" } id' }] },
      jsonrpc: '2.0',
      id: 'client-7',
    });
  });

  it('finds the id when it comes first', () => {
    const text = '{"jsonrpc":"2.0","id":3,"result":{"id":99,"nested":{"id":5}}}';
    expect(inspectPhoneFrame(Buffer.from(text))).toMatchObject({ kind: 'response', id: 3 });
    expect(restore(text, 'x')).toEqual({ jsonrpc: '2.0', id: 'x', result: { id: 99, nested: { id: 5 } } });
  });

  it('is not fooled by an "id" inside nested values or strings', () => {
    const text = '{"result":{"text":"\\",\\"id\\":1}"},"error":null,"jsonrpc":"2.0", "id" : 8 }';
    expect(inspectPhoneFrame(Buffer.from(text))).toMatchObject({ kind: 'response', id: 8 });
    const nestedLast = '{"result":{"a":{"id":1}},"jsonrpc":"2.0","id":2}';
    expect(inspectPhoneFrame(Buffer.from(nestedLast))).toMatchObject({ kind: 'response', id: 2 });
    const nestedOnly = '{"result":{"x":1,"id":2}}';
    expect(inspectPhoneFrame(Buffer.from(nestedOnly))).toMatchObject({ kind: 'invalid' });
  });

  it('handles errors, string ids, whitespace and escaped backslashes', () => {
    const text = '{ "error" : {"code":-1,"message":"a\\\\"} ,\n "jsonrpc":"2.0",\n "id" : "r\\"1" }';
    expect(inspectPhoneFrame(Buffer.from(text))).toMatchObject({ kind: 'response', id: 'r"1' });
    expect(restore(text, 5)).toEqual({ error: { code: -1, message: 'a\\' }, jsonrpc: '2.0', id: 5 });
  });

  it('parses requests and notifications whole', () => {
    expect(
      inspectPhoneFrame(Buffer.from('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}')),
    ).toEqual({
      kind: 'message',
      value: { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info' } },
    });
    expect(inspectPhoneFrame(Buffer.from('{"id":1,"jsonrpc":"2.0","method":"ping"}'))).toMatchObject({
      kind: 'message',
    });
  });

  it('reports garbage as invalid', () => {
    for (const bad of [
      '',
      'nope',
      '[]',
      '{}',
      '{"jsonrpc":"2.0"}',
      '{"result":1',
      '{"result":1,"id":}',
      '{"result":{"a":"unterminated}',
    ]) {
      expect(inspectPhoneFrame(Buffer.from(bad)).kind).toBe('invalid');
    }
  });

  it('keeps multi-byte UTF-8 intact around the id', () => {
    const text = JSON.stringify({ result: { text: 'héllo → 📱 "id":1' }, jsonrpc: '2.0', id: 'ü' });
    expect(inspectPhoneFrame(Buffer.from(text))).toMatchObject({ kind: 'response', id: 'ü' });
    expect(restore(text, 'ök')).toEqual({ result: { text: 'héllo → 📱 "id":1' }, jsonrpc: '2.0', id: 'ök' });
    const first = '{"jsonrpc":"2.0","id":"ü","result":{"t":"📱"}}';
    expect(restore(first, 1)).toEqual({ jsonrpc: '2.0', id: 1, result: { t: '📱' } });
  });

  it('restores ids in a 256 KiB response exactly as a full parse would', () => {
    const big = {
      result: { content: [{ type: 'text', text: 'y'.repeat(256 * 1024 - 100) }], structuredContent: { id: 1 } },
      jsonrpc: '2.0',
      id: 123456,
    };
    const text = JSON.stringify(big);
    expect(restore(text, 'abc')).toEqual({ ...big, id: 'abc' });
  });

  it('reads the usual answer shape over bytes, whitespace and all, as the regexes would', () => {
    for (const [text, id] of [
      [' {\n "result" : {"x":[1]} ,\t"jsonrpc":"2.0" , "id" : 42 }\r\n', 42],
      ['{"error":{"code":-1,"message":"m"},"jsonrpc":"2.0","id":7}', 7],
      ['{"result":{"t":"x,\\"id\\":5}"},"jsonrpc":"2.0","id":3}', 3],
      ['{"result":1,"id":-5}', -5],
      ['{"result":1,"id":"9"}', '9'],
    ] as const) {
      const f = inspectPhoneFrame(Buffer.from(text));
      expect(f).toMatchObject({ kind: 'response', id });
      expect(restore(text, 'c')).toEqual({ ...JSON.parse(text), id: 'c' });
    }
  });
  it('writes every client id back as JSON.stringify writes it, byte for byte', () => {
    for (const text of [
      '{"result":{"t":"é"},"jsonrpc":"2.0","id":5}',
      JSON.stringify({ result: { t: 'z'.repeat(300) }, jsonrpc: '2.0', id: 12 }),
    ]) {
      const f = inspectPhoneFrame(Buffer.from(text));
      if (f.kind !== 'response') throw new Error('not a response');
      for (const id of [0, 7, 9, 10, 99, 100, 123456789, Number.MAX_SAFE_INTEGER, -1, -0, 1.5, 1e21, 'a"é', '', null]) {
        const b = Buffer.from(text);
        const want = Buffer.concat([b.subarray(0, f.idStart), Buffer.from(JSON.stringify(id)), b.subarray(f.idEnd)]);
        expect(withId(b, f.idStart, f.idEnd, id).toString()).toBe(want.toString());
      }
    }
  });

  it('reads a numeric id at the end as JSON.parse reads it, however long', () => {
    for (const digits of ['0', '7', '123456789012345', '1234567890123456', '12345678901234567890']) {
      const text = `{"result":1,"jsonrpc":"2.0","id":${digits}}`;
      expect(inspectPhoneFrame(Buffer.from(text))).toMatchObject({
        kind: 'response',
        id: JSON.parse(digits) as number,
      });
    }
    // A leading zero is no JSON number: the frame is invalid, as JSON.parse says.
    for (const digits of ['007', '00'])
      expect(inspectPhoneFrame(Buffer.from(`{"result":1,"jsonrpc":"2.0","id":${digits}}`))).toMatchObject({
        kind: 'invalid',
      });
  });
});

describe('inspectPhoneFrame: only one whole JSON object is a response', () => {
  // Strings with braces, brackets, escaped quotes and backslashes, and multi-byte UTF-8; one
  // string long enough to be finished by indexOf rather than byte by byte.
  const result = {
    content: [{ type: 'text', text: 'a } ] "quoted" \\" { [ \\ é 📱 ,"id":1}' }],
    structuredContent: { id: 5, list: [1, [2, { x: '}' }]], long: `${'z'.repeat(70)}"}\\` },
  };
  const sdkOrder = JSON.stringify({ result, jsonrpc: '2.0', id: 4242 });
  const idFirst = JSON.stringify({ jsonrpc: '2.0', id: 4242, result });
  const inspect = (text: string) => inspectPhoneFrame(Buffer.from(text));

  it('reads the samples whole', () => {
    for (const text of [sdkOrder, idFirst]) {
      expect(inspect(text)).toMatchObject({ kind: 'response', id: 4242 });
      expect(restore(text, 'c')).toEqual({ ...JSON.parse(text), id: 'c' });
    }
  });

  it('refuses the answer cut at every byte, and never names another id', () => {
    for (const text of [sdkOrder, idFirst]) {
      const bytes = Buffer.from(text);
      for (let cut = 0; cut < bytes.length; cut++) {
        const f = inspectPhoneFrame(bytes.subarray(0, cut));
        expect({ cut, kind: f.kind }).toEqual({ cut, kind: 'invalid' });
        if (f.kind === 'invalid' && f.id !== undefined) expect({ cut, id: f.id }).toEqual({ cut, id: 4242 });
      }
    }
  });

  it('names the id of a cut answer only when it was read whole', () => {
    // The id first: any cut after the name "result" still names it.
    const bytes = Buffer.from(idFirst);
    const after = idFirst.indexOf('"result"') + '"result"'.length;
    for (let cut = 0; cut < after; cut++) {
      const f = inspectPhoneFrame(bytes.subarray(0, cut));
      expect({ cut, id: f.kind === 'invalid' ? f.id : f.kind }).toEqual({ cut, id: undefined });
    }
    for (let cut = after; cut < bytes.length; cut++)
      expect({ cut, f: inspectPhoneFrame(bytes.subarray(0, cut)) }).toMatchObject({ cut, f: { id: 4242 } });
    // The id last: digits at the very end may be the start of a longer id.
    const body = sdkOrder.slice(0, -1);
    for (const text of [body.slice(0, -2), body.slice(0, -1), body])
      expect(inspect(text)).toEqual({ kind: 'invalid', reason: expect.any(String) });
    expect(inspect(`${body} `)).toMatchObject({ kind: 'invalid', id: 4242 });
    // Before result or error the frame may be a request of the phone's, in its own numbering.
    expect(inspect('{"jsonrpc":"2.0","id":7,"meth')).toEqual({ kind: 'invalid', reason: expect.any(String) });
    expect(inspect('{"jsonrpc":"2.0","id":7,"method":"ping"')).toEqual({
      kind: 'invalid',
      reason: 'malformed JSON',
    });
    expect(inspect('{"jsonrpc":"2.0","id":7,"error":{"code":')).toMatchObject({ kind: 'invalid', id: 7 });
    expect(inspect('{"jsonrpc":"2.0","id":7 , "result"')).toMatchObject({ kind: 'invalid', id: 7 });
  });

  it('refuses anything but whitespace after the closing brace, naming the id', () => {
    for (const text of [sdkOrder, idFirst, '{"result":1,"jsonrpc":"2.0","id":"s"}'])
      for (const tail of ['x', '}', ']', ',', '"', '{}', ' 1', '\n{"result":{},"id":8}', text]) {
        const f = inspect(text + tail);
        expect({ tail, f }).toMatchObject({ tail, f: { kind: 'invalid', reason: 'trailing data' } });
        expect(f.kind === 'invalid' && f.id).toBe(text.includes('"s"') ? 's' : 4242);
      }
  });

  it('without the check, reads every frame as checkedWhole then makes it read with the check', () => {
    const bytes = Buffer.from(sdkOrder);
    const frames = [sdkOrder, idFirst, '{"result":1,"jsonrpc":"2.0","id":007}', `${sdkOrder}x`, ` ${sdkOrder}\n`];
    for (let cut = 0; cut < bytes.length; cut += 7) frames.push(bytes.subarray(0, cut).toString() + ',"id":4242}');
    let unchecked = 0;
    for (const text of frames) {
      const b = Buffer.from(text);
      const f = inspectPhoneFrame(b, false);
      if (f.kind === 'response' && f.unchecked) unchecked++;
      const g = f.kind === 'response' && f.unchecked ? checkedWhole(b, f) : f;
      const { unchecked: _, ...read } = g as Extract<PhoneFrame, { kind: 'response' }>;
      expect({ text, read }).toEqual({ text, read: inspectPhoneFrame(b) });
    }
    // The cut frames end as an answer does: they took the path without the check.
    expect(unchecked).toBeGreaterThan(frames.length / 2);
  });

  it('accepts whitespace before and after the object', () => {
    for (const text of [sdkOrder, idFirst, '{"result":1,"jsonrpc":"2.0","id":-3}'])
      for (const ws of [' ', '\n', '\r\n', '\t \n  '])
        expect(inspect(ws + text + ws)).toMatchObject({ kind: 'response', id: text.includes('-3') ? -3 : 4242 });
  });

  it('follows strings of every length around the byte-by-byte limit, escapes included', () => {
    for (let n = 0; n < 140; n++)
      for (const text of [
        `${'a'.repeat(n)}"`,
        `${'a'.repeat(n)}\\`,
        `${'a'.repeat(n)}\\"}`,
        `${'a'.repeat(n)}\\\\"{`,
        `{${'\\'.repeat(n)}`,
      ]) {
        const frame = JSON.stringify({ result: { text }, jsonrpc: '2.0', id: n });
        expect(inspect(frame)).toMatchObject({ kind: 'response', id: n });
        expect(inspect(frame.slice(0, -1))).toMatchObject({ kind: 'invalid' });
        // The string's closing quote dropped: everything after it is read as more string.
        const unclosed = frame.replace(/"},"jsonrpc"/, '},"jsonrpc"');
        expect(inspect(unclosed)).toMatchObject({ kind: 'invalid' });
      }
  });
});
