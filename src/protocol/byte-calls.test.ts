import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { prng } from '../prng.ts';
import { bufferSpan, copyOf, setBytes, spanOf, writeUtf8 } from './byte-calls.ts';

// Each once-read method against the Buffer method it stands for, on pooled Buffers (whose
// byteOffset into their ArrayBuffer is not 0) and on Buffers of their own.
describe('byte calls read once', () => {
  const rnd = prng(0x5eed);
  const int = (n: number) => Math.floor(rnd() * n);
  const source = () => {
    const n = 1 + int(200);
    const b = rnd() < 0.5 ? Buffer.allocUnsafe(n) : Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = int(256);
    return b;
  };

  it('spanOf is subarray as a view of the same memory; setBytes is set', () => {
    for (let round = 0; round < 2000; round++) {
      const src = source();
      const from = int(src.length);
      const n = int(src.length - from + 1);
      const view = spanOf(src, from, n);
      expect(Buffer.from(view.buffer, view.byteOffset, view.length).equals(src.subarray(from, from + n))).toBe(true);
      const out = Buffer.alloc(n + 8, 0xee);
      const expected = Buffer.alloc(n + 8, 0xee);
      const at = int(9);
      setBytes.call(out, view, at);
      expected.set(src.subarray(from, from + n), at);
      expect(out.equals(expected)).toBe(true);
      src[from] ^= 0xff; // a view, not a copy
      if (n > 0) expect(view[0]).toBe(src[from]);
    }
  });

  it('bufferSpan is subarray: a Buffer over the same memory', () => {
    for (let round = 0; round < 2000; round++) {
      const src = source();
      const from = int(src.length + 1);
      const end = from + int(src.length - from + 1);
      const span = bufferSpan(src, from, end);
      expect(span).toBeInstanceOf(Buffer);
      expect(span.equals(src.subarray(from, end))).toBe(true);
      expect(span.buffer).toBe(src.buffer);
      expect(span.byteOffset).toBe(src.byteOffset + from);
      if (end > from) {
        src[from] ^= 0xff; // a view, not a copy
        expect(span[0]).toBe(src[from]);
      }
      expect(span.toString('latin1')).toBe(src.toString('latin1', from, end));
    }
  });

  it('writeUtf8 writes what Buffer#write writes, truncated the same way', () => {
    const pieces = ['a', 'é', '€', '𝄞', '"', '\\', 'z9', ' '];
    for (let round = 0; round < 2000; round++) {
      let text = '';
      for (let k = int(20); k > 0; k--) text += pieces[int(pieces.length)];
      const size = 1 + int(60);
      const at = int(size);
      const room = int(size - at + 1);
      const a = Buffer.alloc(size, 0xee);
      const b = Buffer.alloc(size, 0xee);
      expect(writeUtf8.call(a, text, at, room)).toBe(b.write(text, at, room));
      expect(a.equals(b)).toBe(true);
    }
  });

  it('copyOf holds the first n bytes of the memory, and keeps them when the memory is written again', () => {
    const memory = new ArrayBuffer(64 * 1024);
    const bytes = new Uint8Array(memory);
    for (const n of [0, 1, 300, 4095, 4096, 64 * 1024]) {
      for (let i = 0; i < n; i++) bytes[i] = int(256);
      const want = Buffer.from(bytes.subarray(0, n));
      const copy = copyOf(memory, n);
      bytes.fill(0xee);
      expect(copy.equals(want)).toBe(true);
    }
  });
});
