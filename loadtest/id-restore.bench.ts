// Cost of giving a phone's response its client id back: our span rewrite vs a full
// JSON.parse + JSON.stringify round trip, on responses of 1 KiB to 256 KiB.
// Run: npx tsx loadtest/id-restore.bench.ts
import { inspectPhoneFrame, withId } from '../src/protocol/frame.ts';

function frameOf(bytes: number, shape: 'text' | 'tree'): Buffer {
  const result =
    shape === 'text'
      ? { content: [{ type: 'text', text: 'x'.repeat(Math.max(0, bytes - 80)) }] }
      : {
          structuredContent: {
            elements: Array.from({ length: Math.max(1, Math.floor(bytes / 110)) }, (_, i) => ({
              id: `e${i}`,
              role: 'button',
              text: `Item ${i}`,
              bounds: [0, i, 100, i + 10],
            })),
          },
        };
  return Buffer.from(JSON.stringify({ result, jsonrpc: '2.0', id: 123456 }));
}

function time(fn: () => unknown, minMs = 400): number {
  for (let i = 0; i < 50; i++) fn();
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < minMs) {
    for (let i = 0; i < 20; i++) fn();
    n += 20;
  }
  return ((performance.now() - start) * 1000) / n; // µs per op
}

export function runIdRestoreBench(): Array<Record<string, string | number>> {
  const rows: Array<Record<string, string | number>> = [];
  for (const shape of ['text', 'tree'] as const) {
    for (const kib of [1, 16, 64, 256]) {
      const text = frameOf(kib * 1024 - 200, shape);
      const span = () => {
        const f = inspectPhoneFrame(text);
        if (f.kind !== 'response') throw new Error('bench frame not a response');
        return withId(text, f.idStart, f.idEnd, 'client-1');
      };
      // The naive relay: decode the frame, parse, set the id, serialise, encode for the socket.
      const full = () => {
        const m = JSON.parse(text.toString('utf8')) as { id: unknown };
        m.id = 'client-1';
        return Buffer.from(JSON.stringify(m));
      };
      if (JSON.stringify(JSON.parse(span().toString())) !== full().toString()) throw new Error('rewrites disagree');
      const a = time(span);
      const b = time(full);
      rows.push({
        shape,
        size: `${kib} KiB`,
        'span rewrite µs': a.toFixed(1),
        'decode+parse+stringify+encode µs': b.toFixed(1),
        speedup: `${(b / a).toFixed(1)}x`,
      });
    }
  }
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) console.table(runIdRestoreBench());
