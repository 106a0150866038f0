// Reading this process's Prometheus registry, for tests that run a relay in-process.
import { registry } from '../../src/metrics.ts';

/** One sample as /metrics would serve it, by name and exact label text (`{role="origin"}`). */
export async function sample(name: string, labels = ''): Promise<number | undefined> {
  const line = (await registry.metrics()).split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Polls (every 50 ms, at most 5 s) until the sample has the value; returns its last value. */
export async function waitForSample(name: string, want: number, labels = ''): Promise<number | undefined> {
  for (let i = 0; i < 100 && (await sample(name, labels)) !== want; i++) await new Promise((r) => setTimeout(r, 50));
  return sample(name, labels);
}
