// The one-line progress display: phones connected, calls/s, errors, p99 so far. On a TTY it
// redraws one line four times a second; otherwise (CI, a pipe) it prints a line every 5 s.
import type { MetricSet } from './metrics.ts';

export interface ProgressSource {
  metrics: MetricSet;
  phones(): number;
  /** Optional scenario-specific tail ("phase 2/3"). */
  note?(): string;
}

export function progressLine(src: ProgressSource, callsPerS: number): string {
  const m = src.metrics.views();
  const errors = m.errors?.values.count ?? 0;
  const p99 = m.call_duration?.values['p(99)'];
  const note = src.note?.() ?? '';
  return [
    `${src.metrics.elapsedS().toFixed(0).padStart(4)}s`,
    `phones ${src.phones()}`,
    `calls/s ${callsPerS.toFixed(0)}`,
    `errors ${errors}`,
    `p99 ${p99 === undefined || Number.isNaN(p99) ? '-' : `${p99.toFixed(1)} ms`}`,
    note,
  ]
    .filter(Boolean)
    .join(' | ');
}

export function startProgress(src: ProgressSource, out: NodeJS.WriteStream = process.stdout): () => void {
  const tty = !!out.isTTY;
  let lastCalls = 0;
  let lastAt = performance.now();
  const tick = () => {
    const now = performance.now();
    const calls = src.metrics.views().calls?.values.count ?? 0;
    const rate = ((calls - lastCalls) * 1000) / Math.max(1, now - lastAt);
    lastCalls = calls;
    lastAt = now;
    const line = progressLine(src, rate);
    if (tty) out.write(`\r\x1b[2K${line.slice(0, (out.columns || 120) - 1)}`);
    else out.write(`${line}\n`);
  };
  const timer = setInterval(tick, tty ? 250 : 5000);
  timer.unref();
  return () => {
    clearInterval(timer);
    if (tty) out.write('\r\x1b[2K');
  };
}
