// `node --import tsx loadtest/cpu-profile.ts FILE.cpuprofile [--top N] [--from S --to S]`:
// the top self-time functions of a `node --cpu-prof` profile, as a share of the busy time
// (idle excluded), to read where the relay's per-call CPU goes (docs/BENCHMARKS.md, "Relay
// overhead"; `npm run loadtest -- relay-overhead --cpu-prof DIR` writes one per relay child).
// --from/--to keep only samples in that window (seconds from the profile's start): the
// steady state, without start-up.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { parseArgs } from 'node:util';

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * Every busy sample (idle excluded) within [fromS, toS] seconds of the profile's start: its
 * leaf node and the time it stands for (µs). Returns the busy time in all (µs).
 */
export function forEachBusySample(
  profile: Profile,
  each: (leaf: ProfileNode, dtUs: number) => void,
  opts: { fromS?: number; toS?: number } = {},
): number {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  let t = 0;
  let busy = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    const dt = profile.timeDeltas[i + 1] ?? 0;
    if (opts.fromS !== undefined && t < opts.fromS * 1e6) continue;
    if (opts.toS !== undefined && t > opts.toS * 1e6) break;
    const n = byId.get(profile.samples[i])!;
    if (n.callFrame.functionName === '(idle)') continue;
    each(n, dt);
    busy += dt;
  }
  return busy;
}

export function summarise(
  profile: Profile,
  opts: { top?: number; fromS?: number; toS?: number } = {},
): { busyMs: number; rows: Array<{ share: number; ms: number; name: string }> } {
  const self = new Map<string, number>();
  const busy = forEachBusySample(
    profile,
    ({ callFrame: f }, dt) => {
      const where = f.url ? ` ${relative(process.cwd(), f.url.replace(/^file:\/\//, ''))}:${f.lineNumber + 1}` : '';
      const name = `${f.functionName || '(anonymous)'}${where}`;
      self.set(name, (self.get(name) ?? 0) + dt);
    },
    opts,
  );
  const rows = [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, opts.top ?? 40)
    .map(([name, us]) => ({ share: us / Math.max(1, busy), ms: us / 1000, name }));
  return { busyMs: busy / 1000, rows };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const { values, positionals } = parseArgs({
    options: { top: { type: 'string', default: '40' }, from: { type: 'string' }, to: { type: 'string' } },
    allowPositionals: true,
  });
  for (const file of positionals) {
    const s = summarise(JSON.parse(readFileSync(file, 'utf8')) as Profile, {
      top: Number(values.top),
      fromS: values.from === undefined ? undefined : Number(values.from),
      toS: values.to === undefined ? undefined : Number(values.to),
    });
    console.log(`${file}: busy ${s.busyMs.toFixed(0)} ms`);
    for (const r of s.rows)
      console.log(`${(r.share * 100).toFixed(1).padStart(5)} %  ${r.ms.toFixed(1).padStart(8)} ms  ${r.name}`);
  }
}
