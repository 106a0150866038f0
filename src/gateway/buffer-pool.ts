// Reusable buffers for answers that are written once and dropped (docs/decisions/0235-pooled-answer-buffers.md).
// A fresh Buffer of 4 KiB or more is an ArrayBuffer of its own, outside V8's heap: hundreds of
// them between two scavenges (256 KiB screenshots at a few hundred answers a second) count as
// external memory pressure, and V8 answers that with a full mark-compact of the whole heap,
// several a second. A buffer taken here goes back once uWS has copied it (Exchange), so the
// same few stay in use.

/** Below this Node's own pool serves `Buffer.allocUnsafe` (Buffer.poolSize >>> 1): nothing to gain. */
export const POOLED_MIN_BYTES = 4096;

export class BufferPool {
  private readonly free: Buffer[][] = [];
  private freeBytes = 0;

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
      return b.subarray(0, n);
    }
    // Its own ArrayBuffer, whole (allocUnsafeSlow): release tells a pooled buffer by its size.
    return Buffer.allocUnsafeSlow(1 << cls).subarray(0, n);
  }

  /** Gives back a buffer `take` returned; nothing may read it afterwards. Others are ignored. */
  release(b: Buffer): void {
    const whole = b.buffer;
    const size = whole.byteLength;
    // Only the whole ArrayBuffer of a size class goes back: never a slice of Node's shared pool.
    if (b.byteOffset !== 0 || size < POOLED_MIN_BYTES || size > 2 * this.maxBytes || (size & (size - 1)) !== 0) return;
    if (this.freeBytes + size > this.keepBytes) return;
    this.freeBytes += size;
    (this.free[Math.log2(size)] ??= []).push(Buffer.from(whole, 0, size));
  }
}

/** log2 of the smallest power of two ≥ n. */
function sizeClass(n: number): number {
  return 32 - Math.clz32(n - 1);
}
