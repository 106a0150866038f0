// Micro-benchmark (not part of the test suite): round trip of sendToNode between two buses, i.e. the
// bus's share of a cross-node call (request A→B, response B→A). Real Redis; nothing else.
//   npx tsx src/bus/redis/bench.ts [--n 20000] [--concurrency 64] [--seconds 5]
import process from 'node:process';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RedisBus } from './index.ts';
import { dropPrefix, quietLog, randomPrefix, REDIS_URL } from './test-support.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '64' },
    seconds: { type: 'string', default: '5' },
  },
});
const N = Number(values.n);
const C = Number(values.concurrency);
const SECONDS = Number(values.seconds);

const prefix = randomPrefix();
const a = await RedisBus.connect(REDIS_URL, 'bench-a', quietLog, { prefix });
const b = await RedisBus.connect(REDIS_URL, 'bench-b', quietLog, { prefix });

// B echoes; A resolves the waiting call by its id (as the gateway matches responses).
const waiting = new Map<string, () => void>();
b.onNodeMessage((m) => void b.sendToNode('bench-a', m));
a.onNodeMessage((m) => {
  const id = m.slice(0, m.indexOf(' '));
  waiting.get(id)?.();
  waiting.delete(id);
});
const payload = JSON.stringify({
  jsonrpc: '2.0',
  method: 'tools/call',
  params: { name: 'screen.tap', arguments: { x: 1, y: 2 } },
});
let seq = 0;
function call(): Promise<void> {
  const id = String(++seq);
  return new Promise<void>((resolve) => {
    waiting.set(id, resolve);
    void a.sendToNode('bench-b', `${id} ${payload}`);
  });
}

function pct(sorted: number[], p: number): string {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))].toFixed(3);
}

async function sequential(label: string, f: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 1000; i++) await f(); // warm-up
  const t: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await f();
    t.push(performance.now() - t0);
  }
  t.sort((x, y) => x - y);
  console.log(
    `${label.padEnd(34)} n=${N}  p50=${pct(t, 50)} ms  p90=${pct(t, 90)} ms  p99=${pct(t, 99)} ms  max=${t[t.length - 1].toFixed(3)} ms`,
  );
}

const raw = new Redis(REDIS_URL);
await sequential('redis PING (one hop, baseline)', () => raw.ping());
const seqCpu0 = process.cpuUsage();
await sequential('sendToNode round trip A→B→A', call);
const seqCpu = process.cpuUsage(seqCpu0);
console.log(
  'CPU µs per sequential round trip'.padEnd(34),
  ((seqCpu.user + seqCpu.system) / (N + 1000)).toFixed(1),
  `(system ${(seqCpu.system / (N + 1000)).toFixed(1)})`,
);

// Throughput: C calls in flight for SECONDS.
let done = 0;
const cpu0 = process.cpuUsage();
const end = performance.now() + SECONDS * 1000;
await Promise.all(
  Array.from({ length: C }, async () => {
    while (performance.now() < end) {
      await call();
      done++;
    }
  }),
);
const cpu = process.cpuUsage(cpu0);
console.log(`${'round trips/s, concurrency ' + C}`.padEnd(34), Math.round(done / SECONDS));
// Both buses run in this process: this is the bus's CPU for one cross-node call summed over both nodes.
console.log(
  'CPU µs per round trip (both buses)'.padEnd(34),
  ((cpu.user + cpu.system) / done).toFixed(1),
  `(system ${(cpu.system / done).toFixed(1)})`,
);

raw.disconnect();
await a.close();
await b.close();
await dropPrefix(prefix);
