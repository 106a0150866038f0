// The intern table's key: a frame equal to a recent one is recognised by comparing bytes,
// and only equal bytes share a value (docs/decisions/0060-shared-phone-surfaces.md).
import { describe, expect, it } from 'vitest';
import { InternTable } from './intern-table.ts';

describe('InternTable', () => {
  it('shares one value between equal frames in different buffers, and not with a different frame of the same length', () => {
    const t = new InternTable<{ n: number }>();
    let made = 0;
    const make = () => ({ n: ++made });
    const a = t.acquire(Buffer.from('{"result":{"x":1}}'), make);
    const b = t.acquire(Buffer.from('{"result":{"x":1}}'), make);
    const c = t.acquire(Buffer.from('{"result":{"x":2}}'), make);
    expect(b.value).toBe(a.value);
    expect(b.key).toBe(a.key);
    expect(c.value).not.toBe(a.value);
    expect(made).toBe(2);
    expect(t.size).toBe(2);
  });

  it('keeps its own copy of a frame: a caller reusing its buffer does not change what matches', () => {
    const t = new InternTable<string>();
    const buf = Buffer.from('{"result":"one"}');
    const one = t.acquire(buf, () => 'one');
    buf.write('{"result":"two"}');
    const two = t.acquire(buf, () => 'two');
    expect(two.value).toBe('two');
    expect(t.acquire(Buffer.from('{"result":"one"}'), () => 'again').value).toBe(one.value);
  });

  it('drops a value when its last holder releases it, and builds it again after', () => {
    const t = new InternTable<object>();
    const frame = Buffer.from('{"result":{}}');
    const a = t.acquire(frame, () => ({}));
    a.release();
    a.release(); // once only
    expect(t.size).toBe(0);
    const b = t.acquire(frame, () => ({ again: true }));
    expect(b.value).toEqual({ again: true });
    expect(b.key).toBe(a.key);
  });

  it('files answers to different request ids as one entry when told where the id is, without a copy per id', () => {
    const t = new InternTable<{ n: number }>();
    let made = 0;
    const make = () => ({ n: ++made });
    const at = (f: string) => ({ start: f.indexOf('"id":') + 5, end: f.lastIndexOf('}') });
    const f1 = '{"result":{"x":1},"jsonrpc":"2.0","id":1}';
    const f27 = '{"result":{"x":1},"jsonrpc":"2.0","id":27}';
    const other = '{"result":{"x":2},"jsonrpc":"2.0","id":27}';
    const a = t.acquire(Buffer.from(f1), make, at(f1));
    const b = t.acquire(Buffer.from(f27), make, at(f27));
    // The same content with its id already 0 and no range given: the same key.
    const zero = t.acquire(Buffer.from('{"result":{"x":1},"jsonrpc":"2.0","id":0}'), make);
    const c = t.acquire(Buffer.from(other), make, at(other));
    expect(b.value).toBe(a.value);
    expect(zero.key).toBe(a.key);
    expect(c.value).not.toBe(a.value);
    expect(made).toBe(2);
  });
});
