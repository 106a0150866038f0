// SseStream against a stand-in uWS response: every event's data is one line whatever its type
// (the phone's JSON may have line breaks between tokens), and after backpressure the onWritable
// handler always writes and returns that write's result, since uWS leaves draining what it holds
// to a registered handler (SseStream.waitWritable).
import { describe, expect, it } from 'vitest';
import { Exchange } from './http.ts';
import { oneLine, SseStream } from './sse.ts';
import type { HttpResponse } from '../uws.ts';

/** A response that records writes; `accept` decides each write's result (false: backpressure). */
function fakeResponse() {
  const f = {
    written: [] as string[],
    accept: true,
    writable: undefined as ((offset: number) => boolean) | undefined,
    ended: false,
    res: undefined as unknown as HttpResponse,
  };
  const res = {
    onAborted: () => res,
    cork: (cb: () => void) => (cb(), res),
    writeStatus: () => res,
    writeHeader: () => res,
    write: (chunk: string | Buffer) => (f.written.push(chunk.toString()), f.accept),
    end: () => ((f.ended = true), res),
    onWritable: (h: (offset: number) => boolean) => ((f.writable = h), res),
  };
  f.res = res as unknown as HttpResponse;
  return f;
}

const turn = () => new Promise<void>((r) => setImmediate(r));

describe('SseStream', () => {
  it('writes every data line as one line, text or bytes', async () => {
    const f = fakeResponse();
    const s = new SseStream(new Exchange(f.res), {}, 0);
    s.send('{\r\n  "a": 1\n}', '1');
    s.send(Buffer.from('{\n"b":\r2}'));
    await turn();
    expect(f.written.join('')).toBe(
      ': open\n\nid: 1\nevent: message\ndata: {    "a": 1 }\n\nevent: message\ndata: { "b": 2}\n\n',
    );
    s.end();
  });

  it('oneLine returns the same string when it has no line break', () => {
    const text = '{"jsonrpc":"2.0","id":1,"result":{}}';
    expect(oneLine(text)).toBe(text);
    expect(oneLine('{\r\n"x":\r1\n}')).toBe('{  "x": 1 }');
  });

  it('after backpressure, onWritable writes (the queue, or a comment) and returns the result', async () => {
    const f = fakeResponse();
    const s = new SseStream(new Exchange(f.res), {}, 0);
    f.accept = false;
    s.send('{"n":1}');
    await turn();
    expect(f.writable).toBeDefined();
    s.send('{"n":2}'); // queued while uWS holds the rest
    await turn();
    expect(f.written).toHaveLength(1);

    // Still backpressured: the queued event is handed over, the handler says the write failed.
    expect(f.writable!(0)).toBe(false);
    expect(f.written.at(-1)).toBe('event: message\ndata: {"n":2}\n\n');

    // Writable with nothing queued: a comment line makes uWS send what it holds.
    f.accept = true;
    expect(f.writable!(0)).toBe(true);
    expect(f.written.at(-1)).toBe(':\n');

    // Not waiting any more: a spurious writable event writes nothing.
    expect(f.writable!(0)).toBe(true);
    expect(f.written).toHaveLength(3);
    s.end();
    await turn();
    expect(f.ended).toBe(true);
  });

  it('an end queued while waiting is written by onWritable', async () => {
    const f = fakeResponse();
    const s = new SseStream(new Exchange(f.res), {}, 0);
    f.accept = false;
    s.send('{"n":1}');
    await turn();
    s.end();
    await turn();
    expect(f.ended).toBe(false);
    f.accept = true;
    expect(f.writable!(0)).toBe(true);
    expect(f.ended).toBe(true);
    expect(f.written).toHaveLength(1); // nothing more to write than the end itself
  });
});
