// Reusable buffers for answers that are written once and dropped (docs/decisions/0235-pooled-answer-buffers.md).
// A fresh Buffer of 4 KiB or more is an ArrayBuffer of its own, outside V8's heap: hundreds of
// them between two scavenges (256 KiB screenshots at a few hundred answers a second) count as
// external memory pressure, and V8 answers that with a full mark-compact of the whole heap,
// several a second. A buffer taken here goes back once nothing reads it (Exchange: after uWS
// copied it; Served: after Redis read it), so the same few stay in use.
import { Buffer } from 'node:buffer';
import { bufferSpan } from '../protocol/byte-calls.ts';

/** Below this Node's own pool serves `Buffer.allocUnsafe` (Buffer.poolSize >>> 1): nothing to gain. */
export const POOLED_MIN_BYTES = 4096;

export class BufferPool {
  private readonly free: Buffer[][] = [];
  private freeBytes = 0;
  /**
   * The ArrayBuffers this pool made. Only these come back: a small Buffer is a slice of Node's
   * shared pool, which may start at offset 0 of an 8 KiB ArrayBuffer that Node goes on slicing.
   */
  private readonly own = new WeakSet<ArrayBufferLike>();

  /**
   * @param maxBytes the largest buffer pooled; larger ones are plain allocations
   * @param keepBytes what the free lists may hold in all; a buffer returned past it is dropped
   */
  constructor(
    readonly maxBytes: number,
    readonly keepBytes: number,
  ) {}

  /** Bytes held for reuse. */
  get heldBytes(): number {
    return this.freeBytes;
  }

  /**
   * A buffer of exactly `n` bytes (a view of a pooled one: its size class is the next power of
   * two), its contents undefined. Return it with `release` once nothing reads it.
   */
  take(n: number): Buffer {
    if (n < POOLED_MIN_BYTES || n > this.maxBytes) return Buffer.allocUnsafe(n);
    const cls = sizeClass(n);
    const b = this.free[cls]?.pop();
    if (b) {
      this.freeBytes -= b.buffer.byteLength;
      return bufferSpan(b, 0, n);
    }
    const made = Buffer.allocUnsafeSlow(1 << cls);
    this.own.add(made.buffer);
    return bufferSpan(made, 0, n);
  }

  /** Gives back a buffer `take` returned; nothing may read it afterwards. Others are ignored. */
  release(b: Buffer): void {
    const whole = b.buffer;
    if (!this.own.has(whole)) return;
    const size = whole.byteLength;
    if (this.freeBytes + size > this.keepBytes) return;
    this.freeBytes += size;
    (this.free[Math.log2(size)] ??= []).push(Buffer.from(whole, 0, size));
  }
}

/** log2 of the smallest power of two ≥ n. */
function sizeClass(n: number): number {
  return 32 - Math.clz32(n - 1);
}
