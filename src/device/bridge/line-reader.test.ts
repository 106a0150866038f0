import { describe, expect, it } from 'vitest';
import { leadingMessages, LineReader, SHARED_LINE_ANSWER, SharedLineError } from './line-reader.ts';

const answer = (id: number, text = 'ok') => JSON.stringify({ jsonrpc: '2.0', id, result: { text } });
const note = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } });

describe('the messages found whole at the start of a line that is not one message', () => {
  it('are read one after another, up to what is not a whole JSON object', () => {
    expect(leadingMessages(`${answer(1)}${note}`)).toHaveLength(2);
    expect(leadingMessages(`${answer(1)} listening on :8080`)).toEqual([JSON.parse(answer(1))]);
    // Braces and escaped quotes inside strings do not end a message.
    const tricky = answer(2, 'a}"{b\\');
    expect(leadingMessages(`${tricky}${answer(3)}`).map((m) => (m as { id: number }).id)).toEqual([2, 3]);
  });

  it('are none when the line starts with anything else, or with a message cut short', () => {
    expect(leadingMessages(`listening ${answer(1)}`)).toEqual([]);
    expect(leadingMessages('{ a: 1 }')).toEqual([]); // console.log of an object
    expect(leadingMessages('{"a":1}')).toEqual([]); // JSON, not JSON-RPC
    // The end of the first message was lost: the one after it is not taken for an answer.
    for (const cut of [40, 43, 46])
      // after a key, inside a string, after the string
      expect(leadingMessages(`${answer(1, 'abc').slice(0, cut)}${answer(2)}`)).toEqual([]);
  });
});

describe('LineReader', () => {
  it('drops a shared line, then gives the error answers of the requests answered on it, then reads on', () => {
    const reader = new LineReader();
    reader.append(Buffer.from(`${answer(1)}${answer(2)}\n${answer(3)}\n`));
    expect(() => reader.readMessage()).toThrow(SharedLineError);
    for (const id of [1, 2])
      expect(reader.readMessage()).toEqual({
        jsonrpc: '2.0',
        id,
        error: { code: -32603, message: SHARED_LINE_ANSWER },
      });
    expect(reader.readMessage()).toEqual(JSON.parse(answer(3)));
    expect(reader.readMessage()).toBeNull();
  });

  it('reads as the SDK does otherwise', () => {
    const reader = new LineReader(64);
    reader.append(Buffer.from('not json\n{"jsonrpc":"2.0","id":1,'));
    expect(() => reader.readMessage()).toThrow(SyntaxError);
    expect(reader.readMessage()).toBeNull(); // the rest of the line has not come yet
    reader.append(Buffer.from('"result":{}}\r\n'));
    expect(reader.readMessage()).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
    expect(() => reader.append(Buffer.alloc(65))).toThrow(/exceeded maximum size of 64 bytes/);
  });
});
