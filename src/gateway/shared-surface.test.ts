// The intern table's key: a frame equal to a recent one is recognised by comparing bytes,
// and only equal bytes share a value (docs/decisions/0060-shared-phone-surfaces.md).
import { describe, expect, it } from 'vitest';
import { InternTable } from './shared-surface.ts';

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
});
