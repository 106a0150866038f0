// Payloads whose every byte can be checked: text generated from a seed (base64url, so JSON
// needs no escaping and a frame's size is exact), its SHA-256 carried beside it.
import { createHash } from 'node:crypto';

const blocks = new Map<number, string>();

/** `length` characters determined by `seed`. */
export function payloadText(seed: number, length: number): string {
  let block = blocks.get(seed % 1024);
  if (!block) {
    const parts: string[] = [];
    for (let i = 0; i < 32; i++)
      parts.push(
        createHash('sha256')
          .update(`${seed % 1024}:${i}`)
          .digest('base64url')
          .slice(0, 43),
      );
    blocks.set(seed % 1024, (block = parts.join('')));
  }
  const reps = Math.ceil(length / block.length);
  return block.repeat(reps).slice(0, length);
}

export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/**
 * A tools/call answer frame of exactly `frameBytes` bytes (if it can be that small):
 * text content from `seed`, structuredContent { n, sha256 }.
 */
export function answerFrame(id: number | string, seed: number, frameBytes: number): string {
  const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"`;
  // n is padded to 7 digits so the tail's length does not depend on it.
  const tail = (n: number, sha: string) =>
    `"}],"structuredContent":{"n":"${String(n).padStart(7, '0')}","sha256":"${sha}"}}}`;
  const n = Math.max(0, frameBytes - head.length - tail(0, '0'.repeat(64)).length);
  const text = payloadText(seed, n);
  return head + text + tail(n, sha256(text));
}

/** Whether an answer from answerFrame arrived intact. */
export function answerIntact(result: any, seed: number): boolean {
  const text = result?.content?.[0]?.text;
  const sc = result?.structuredContent;
  if (typeof text !== 'string' || !sc) return false;
  const n = Number(sc.n);
  return text.length === n && sha256(text) === sc.sha256 && text === payloadText(seed, n);
}
