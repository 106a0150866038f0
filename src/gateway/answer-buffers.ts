// This process's reusable answer buffers (docs/decisions/0235-pooled-answer-buffers.md): room
// for any answer (a phone's frame with the client's id in place of the relay's, and a client's
// id may be long), 8 MiB kept for reuse, shown as phonebridge_answer_buffers_bytes.
import { BufferPool, POOLED_MIN_BYTES } from './buffer-pool.ts';
import { MAX_FRAME_BYTES } from './device-connection.ts';
import { readAnswerBuffersWith } from '../metrics.ts';

export const answerBuffers = new BufferPool(2 * MAX_FRAME_BYTES, 8 * 1024 * 1024);
export const takeAnswerBuffer = (bytes: number): Buffer => answerBuffers.take(bytes);
readAnswerBuffersWith(() => answerBuffers.heldBytes);

/** The pool a `takeAnswerBuffer` buffer goes back to; none for a small one (a slice of Node's own pool). */
export const answerPoolOf = (frame: Buffer): BufferPool | undefined =>
  frame.length >= POOLED_MIN_BYTES ? answerBuffers : undefined;
