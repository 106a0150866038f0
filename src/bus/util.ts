// Small pieces both drivers share: handler lists, replay-buffer ids and limits.
import type { Logger } from '../log.ts';

/** A list of callbacks; one throwing handler never stops the others (nor the dispatcher). */
export class Handlers<A extends unknown[]> {
  private readonly list: Array<(...args: A) => void> = [];
  constructor(
    private readonly what: string,
    private readonly log?: Logger,
  ) {}
  add(h: (...args: A) => void): void {
    this.list.push(h);
  }
  /** Whether anyone listens: a message nobody takes is not converted for them. */
  get empty(): boolean {
    return this.list.length === 0;
  }
  emit(...args: A): void {
    const list = this.list;
    for (let i = 0; i < list.length; i++) {
      const h = list[i];
      try {
        h(...args);
      } catch (err) {
        if (this.log) this.log.error({ err, handler: this.what }, 'bus handler threw');
        else console.error(`bus ${this.what} handler threw`, err);
      }
    }
  }
}

export interface ReplayLimits {
  /** Events kept per session (oldest dropped first). */
  maxEvents: number;
  /** Bytes kept per session (the newest event is kept even if larger). */
  maxBytes: number;
  /** A buffer with no append for this long is dropped; it never outlives its session. */
  ttlMs: number;
}

export const DEFAULT_REPLAY: ReplayLimits = { maxEvents: 100, maxBytes: 1 << 20, ttlMs: 10 * 60_000 };

/** Event ids are `<streamId>:<seq>`: seq is unique per session, the stream is readable from the id. */
export function eventId(streamId: string, seq: number): string {
  return `${streamId}:${seq}`;
}

export function parseEventId(id: string): { streamId: string; seq: number } | undefined {
  const m = /^(.*):(\d{1,15})$/s.exec(id);
  return m ? { streamId: m[1], seq: Number(m[2]) } : undefined;
}

/** Stream ids end up in SSE `id:` lines and in newline-separated records. */
export function checkStreamId(streamId: string): void {
  if (/[\r\n\0]/.test(streamId)) throw new Error('stream id must not contain CR, LF or NUL');
}
