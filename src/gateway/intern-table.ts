// Phones of one fleet serve the same surface: identical initialize results and tool catalogs
// are kept once per node, by content hash and reference count, not once per socket (a
// 15-tool catalog is ~35 KB of JSON and several times that as objects). The hash is over the
// phone's answer as received, so a phone like the others is not even parsed. Shared values
// are frozen: no connection can change what another one sees.
import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}

export interface Shared<T> {
  value: T;
  /** The content hash it is filed under. */
  key: string;
  /** Give it back exactly once, when the connection lets go of it. */
  release(): void;
}

/** Frames hashed last, per table: a phone like the previous ones is recognised by a byte compare. */
const RECENT = 4;

export class InternTable<T> {
  private readonly entries = new Map<string, { value: T; refs: number }>();
  /** Copies of the last few frames and their hashes: comparing 35 KB costs far less than hashing it. */
  private readonly recent: Array<{ bytes: Buffer; key: string }> = [];

  /**
   * The shared value for this content (a phone's raw answer frame, or any string that
   * determines the value); `make` builds it from the same content the first time. Hashing the
   * bytes as received means a hit costs no JSON parse at all.
   */
  acquire(content: string | Buffer, make: () => T, id?: { start: number; end: number }): Shared<T> {
    const key = this.keyOf(content, id);
    let e = this.entries.get(key);
    if (!e) this.entries.set(key, (e = { value: deepFreeze(make()), refs: 0 }));
    e.refs++;
    let released = false;
    return {
      value: e.value,
      key,
      release: () => {
        if (released) return;
        released = true;
        const cur = this.entries.get(key);
        if (cur && --cur.refs === 0) this.entries.delete(key);
      },
    };
  }

  private keyOf(content: string | Buffer, id?: { start: number; end: number }): string {
    if (typeof content === 'string') return createHash('sha256').update(content).digest('base64');
    // Equal bytes are equal content whatever the id range; a recent frame with another id
    // misses here and finds the same entry by its hash.
    for (const r of this.recent) if (r.bytes.equals(content)) return r.key;
    const key = (
      id
        ? createHash('sha256').update(content.subarray(0, id.start)).update('0').update(content.subarray(id.end))
        : createHash('sha256').update(content)
    ).digest('base64');
    // A copy: the caller's buffer is its own to reuse.
    this.recent.unshift({ bytes: Buffer.from(content), key });
    if (this.recent.length > RECENT) this.recent.pop();
    return key;
  }

  /** Distinct values held (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }
}
