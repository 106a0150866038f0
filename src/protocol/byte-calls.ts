// Buffer and Uint8Array methods read once, for the per-call path. Read off a Buffer, a method
// or a view's `buffer` / `byteOffset` is a lookup that V8's optimizing compiler leaves to the
// generic load IC (about 110 instructions a load, where `length` costs a few); and Node's own
// `Buffer#write` makes another such load inside. A function read once and called with `.call`
// is a constant target: a direct call, with nothing looked up
// (docs/decisions/0260-reads-the-optimizer-left-generic.md).
import { Buffer } from 'node:buffer';

const TYPED_ARRAY: object = Object.getPrototypeOf(Uint8Array.prototype) as object;
const Bytes = Uint8Array;

/** A property's function (a method, or an accessor's getter), as `T`. */
function functionOf<T>(o: object, name: string, part: 'value' | 'get'): T {
  const d = Object.getOwnPropertyDescriptor(o, name) as Record<string, unknown> | undefined;
  const f = d?.[part];
  if (typeof f !== 'function') throw new Error(`no ${name} here`);
  return f as T;
}
const bufferOf = functionOf<(this: Uint8Array) => ArrayBuffer>(TYPED_ARRAY, 'buffer', 'get');
const byteOffsetOf = functionOf<(this: Uint8Array) => number>(TYPED_ARRAY, 'byteOffset', 'get');

/** `out.set(src, o)`: `setBytes.call(out, src, o)`. */
export const setBytes = functionOf<(this: Uint8Array, src: ArrayLike<number>, o: number) => void>(
  TYPED_ARRAY,
  'set',
  'value',
);

/**
 * A Buffer of its own holding the first `n` bytes of `memory` (memory its owner will reuse: a
 * uWS chunk, a socket's read buffer), from Node's pool when small: a new ArrayBuffer per copy,
 * as `slice` makes, costs about ten times as much with its collector's bookkeeping.
 */
export function copyOf(memory: ArrayBufferLike, n: number): Buffer {
  const copy = Buffer.allocUnsafe(n);
  setBytes.call(copy, new Bytes(memory, 0, n), 0);
  return copy;
}

/** A view of src[from, from + n): a Uint8Array over the same memory, nothing copied. */
export function spanOf(src: Uint8Array, from: number, n: number): Uint8Array {
  return new Bytes(bufferOf.call(src), byteOffsetOf.call(src) + from, n);
}

type BufferView = new (memory: ArrayBufferLike, byteOffset: number, length: number) => Buffer;

/**
 * The class Node makes Buffers of, as `subarray` finds it (the species of `Buffer`); where a
 * Node has none that makes a Buffer view, a constructor that returns `Buffer.from`'s view.
 */
const BufferView: BufferView = (() => {
  const species = (Buffer as unknown as Record<symbol, unknown>)[Symbol.species];
  if (typeof species === 'function') {
    const made = new (species as BufferView)(new ArrayBuffer(2), 1, 1);
    if (made instanceof Buffer && made.byteOffset === 1 && made.length === 1) return species as BufferView;
  }
  return function (memory: ArrayBufferLike, byteOffset: number, length: number) {
    return Buffer.from(memory, byteOffset, length);
  } as unknown as BufferView;
})();

/**
 * `src.subarray(from, end)` for a Buffer, with 0 <= from <= end <= src.length (not clamped as
 * `subarray` does): a Buffer over the same memory, nothing copied. Node's `subarray` also looks
 * up the species through `constructor`, each a generic read.
 */
export function bufferSpan(src: Uint8Array, from: number, end: number): Buffer {
  return new BufferView(bufferOf.call(src), byteOffsetOf.call(src) + from, end - from);
}

type Utf8Write = (this: Buffer, text: string, offset: number, length: number) => number;
const BUFFER: object = Buffer.prototype as object;
/**
 * `buf.write(text, offset, length)` as UTF-8: `writeUtf8.call(buf, text, offset, length)`, the
 * bytes written. Node's native `utf8Write`, which `Buffer#write` calls after checking its
 * arguments (the callers here pass offsets inside the buffer); `Buffer#write` itself where a
 * Node has no such method.
 */
export const writeUtf8 = functionOf<Utf8Write>(BUFFER, 'utf8Write' in BUFFER ? 'utf8Write' : 'write', 'value');
