// `node --import tsx loadtest/accept-steps.ts FILE.cpuprofile MAIN_MS_PER_ACCEPT`: the relay's
// main-thread busy samples of a storm round (PHONEBRIDGE_LOADTEST_RELAY_PROFILE_DIR) put under
// the steps of a phone accept, each sample under the first step whose pattern matches a frame
// of its stack (function name and file), as a share and as that share of the measured
// main-thread CPU per accept (docs/BENCHMARKS.md, "storm": where an accept's time goes).
import { readFileSync } from 'node:fs';
import { forEachBusySample, type Profile, type ProfileNode } from './cpu-profile.ts';

/** Checked in this order; a sample goes to the first step with a match anywhere on its stack. */
const STEPS: Array<[string, RegExp]> = [
  ['garbage collection on the main thread', /^\(garbage collector\)/],
  ['signature verification', /^verifyOneShot /],
  ['key import', /^(importKey node:internal\/crypto\/webcrypto|importDevicePublicKey |createPublicKey )/],
  ['store (pg, Kysely, the batches)', /(node_modules\/pg|node_modules\/kysely|kysely-store|device-batch)/],
  ['challenge and HTTP exchange', /(handleChallenge |newNonce |src\/gateway\/http\.ts)/],
  [
    'handshake: answers filed, frames out',
    /^(acquire src\/gateway\/intern-table|(load|loadTools) src\/gateway\/phone-surface|onFrame |ready src\/gateway\/device-connection|writeQueued src\/gateway\/device-connection|sendQueued )/,
  ],
  ['socket handlers: open, connection, hub, claim', /(DeviceConnection |claimDevice )/],
  ['upgrade: headers, nonce taken, auth bookkeeping', /^authenticateDevice /],
  ['socket handlers: open, connection, hub, claim', /src\/gateway\/device-socket\.ts/],
];
const OTHER = 'promise jobs, timers, native and other';

const [file, mainMs] = process.argv.slice(2);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const label = (n: ProfileNode) =>
  `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*?\/(node_modules\/|src\/|node:)/, '$1')}`;

const by = new Map<string, number>();
const busy = forEachBusySample(profile, (leaf, dt) => {
  const stack: string[] = [];
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) stack.push(label(byId.get(id)!));
  const step = STEPS.find(([, re]) => stack.some((f) => re.test(f)))?.[0] ?? OTHER;
  by.set(step, (by.get(step) ?? 0) + dt);
});
console.log(`busy main-thread samples: ${(busy / 1000).toFixed(0)} ms`);
for (const [step, t] of [...by].sort((a, b) => b[1] - a[1])) {
  const share = t / busy;
  const us = mainMs ? `  ${(share * Number(mainMs) * 1000).toFixed(0)} µs` : '';
  console.log(`${(share * 100).toFixed(1).padStart(5)} %${us}  ${step}`);
}
