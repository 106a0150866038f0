// Reconnect acceptance: the relay process is killed (SIGKILL: no drain, no close
// frames) and started again on the same port and data dir. One phone must be back within its
// backoff bound; a fleet of simulated phones must come back spread over time, not in a burst.
//
// Count: 150 jittered phones here, not 1,000. The spread measures below (5th to 95th percentile
// of the first attempts, uniform over a 3 s window) do not depend on the count, only the cost does:
// on this 2-core machine the relay spends ~7 ms of CPU per phone to pair and connect (mostly
// embedded Postgres) and a fresh relay takes ~8 s to start, with the rest of the suite competing
// for the cores; loadtest/fleet-bench.ts runs the 1,000-phone version (numbers in its header).
//
// Spread is asserted on the wire, on the phones' side: the time each phone's first request
// after the kill leaves (through the fleet's fetch hook). The relay-side connect times are
// checked too, but they cannot catch a burst on their own: the relay
// accepts ~100–150 phones a second, which would spread even a lockstep herd. So a control
// group whose jitter is switched off (random() = 0.5 for every phone) rides the same kill and
// must show up as a burst, proving the measurement can fail.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { maxIn100ms, startFleet, parseAddresses, type Fleet } from '../../loadtest/fleet.ts';
import { startRelayChild, type RelayChild } from '../../loadtest/fleet-relay.ts';
import { connectClient, waitFor } from '../helpers/relay.ts';
import { caller, freePort, ok, phoneServerFactory, removeScratch, scratchDir, SimPhone } from './helpers.ts';

const N = 150;
const CONTROL = 40;
// First attempts uniform over 3 s: 90 % of them leave within ~2.7 s of each other.
const FLEET_BACKOFF = { dropWindowMs: 3_000, capMs: 6_000 };
const PHONE_BACKOFF = { dropWindowMs: 1_000, capMs: 2_000 };
/** Connection work after the attempt that finds the relay up (challenge, upgrade, initialize, tools/list) under load. */
const HANDSHAKE_SLACK_MS = 3_000;

let port: number;
let dataDir: string;
let relay: RelayChild;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  port = await freePort();
  dataDir = scratchDir('pb-reconnect-');
  relay = await startRelayChild(['--port', String(port), '--data-dir', dataDir]);
}, 60_000);
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
  await relay?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  removeScratch();
});

describe('relay killed and restarted on the same port and data dir', () => {
  it('one phone is back within its backoff bound; the fleet comes back spread out, all within the bound', async () => {
    // --- one phone, with an SDK client using it before and after
    const stateDir = join(scratchDir('pb-phone-'), 'state');
    const [qr] = await relay.pair(1);
    const { device_id: deviceId } = await DeviceAgent.pair({ stateDir, qr, name: 'the-phone', log: silentLogger });
    const agent = new DeviceAgent({
      stateDir,
      createServer: phoneServerFactory(stateDir, new SimPhone({ seed: 5 })),
      log: silentLogger,
      backoff: PHONE_BACKOFF,
      requestTimeoutMs: 5_000,
    });
    agent.start();
    cleanups.push(() => agent.stop());
    const [key] = await relay.keys([deviceId]);
    await waitFor(
      async () => (await relay.connections()).some((c) => c.deviceId === deviceId && c.initialized),
      10_000,
      'phone online',
    );

    // --- the fleet: jittered phones, and a control group with the jitter switched off
    const firstAttempt = new Map<number, number>();
    // The attempt that got each phone back (its last after the kill): when it left is the
    // phones' backoff; when the relay finished accepting it is also the relay's pace.
    const lastAttempt = new Map<number, number>();
    let killedAt = Infinity;
    const stateRoot = mkdtempSync(join(existsShm() ? '/dev/shm' : tmpdir(), 'pb-fleet-'));
    // eslint-disable-next-line @typescript-eslint/require-await -- cleanups are () => Promise<void>
    cleanups.push(async () => rmSync(stateRoot, { recursive: true, force: true }));
    const common = {
      relayUrl: relay.url,
      pairing: async () => (await relay.pair(1))[0],
      concurrency: 50,
      requestTimeoutMs: 5_000,
      // Many loopback sources: real phones come from many addresses, and the relay limits
      // challenges per address (CHALLENGES_PER_MINUTE in src/gateway/device-socket.ts).
      sourceAddresses: parseAddresses('127.0.0.2-127.0.0.41'),
    };
    const fleet: Fleet = await startFleet({
      ...common,
      count: N,
      stateRoot: join(stateRoot, 'jittered'),
      backoff: FLEET_BACKOFF,
      onRequest: (i, url, at) => {
        if (at <= killedAt || !url.endsWith('/device/challenge')) return;
        if (!firstAttempt.has(i)) firstAttempt.set(i, at);
        lastAttempt.set(i, at);
      },
    });
    cleanups.push(() => fleet.stop());
    const controlFirst = new Map<number, number>();
    const control: Fleet = await startFleet({
      ...common,
      count: CONTROL,
      stateRoot: join(stateRoot, 'lockstep'),
      backoff: { ...FLEET_BACKOFF, random: () => 0.5 },
      onRequest: (i, url, at) => {
        if (at > killedAt && url.endsWith('/device/challenge') && !controlFirst.has(i)) controlFirst.set(i, at);
      },
    });
    cleanups.push(() => control.stop());
    await waitFor(
      async () => (await relay.connections()).filter((c) => c.initialized).length === N + CONTROL + 1,
      30_000,
      'everyone online',
    );

    const sdk = await connectClient(relay.mcpUrl, key.token);
    cleanups.push(() => sdk.client.close());
    await sdk.client.listTools();
    expect(ok(await caller(sdk.client)('list_devices')).devices[0].deviceId).toBe(deviceId);
    await sdk.client.close();

    // --- kill, restart
    killedAt = Date.now();
    await relay.kill();
    relay = await startRelayChild(['--port', String(port), '--data-dir', dataDir]);
    const upAt = Date.now();

    const phoneBound = upAt + PHONE_BACKOFF.capMs + HANDSHAKE_SLACK_MS;
    const fleetBound = upAt + FLEET_BACKOFF.capMs + HANDSHAKE_SLACK_MS;
    await waitFor(
      async () => (await relay.connections()).filter((c) => c.initialized).length === N + CONTROL + 1,
      fleetBound - Date.now() + 5_000,
      'everyone back',
    );
    const back = new Map((await relay.connections()).map((c) => [c.deviceId, c.connectedAt]));

    // The one phone: back within its bound, and usable through the relay again.
    expect(back.get(deviceId)! - upAt).toBeLessThanOrEqual(phoneBound - upAt);
    const again = await connectClient(relay.mcpUrl, key.token);
    cleanups.push(() => again.client.close());
    await again.client.listTools();
    expect(ok(await caller(again.client)('list_devices')).devices[0].deviceId).toBe(deviceId);

    // Every fleet phone is back within the bound: the relay holds a new socket for each.
    const jittered = fleet.phones.map((p) => back.get(p.deviceId));
    expect(jittered.every((t) => t !== undefined && t >= upAt - 1_000)).toBe(true);
    const lastBack = Math.max(...(jittered as number[]));
    // Within the bound, as the phones left: every phone tried again within its backoff cap of
    // the relay being up. The relay's accepts of 190 phones at once come after, at its pace on a
    // machine the rest of the suite loads; that they all came is the waitFor above.
    expect(lastAttempt.size).toBe(N);
    const lastTry = Math.max(...lastAttempt.values());
    expect(lastTry - upAt).toBeLessThanOrEqual(fleetBound - upAt);

    // Spread: the first attempts after the kill, as they left the phones...
    const attempts = [...firstAttempt.values()].sort((a, b) => a - b);
    expect(attempts).toHaveLength(N);
    const attemptPeak = maxIn100ms(attempts);
    const attemptSpan = attempts[Math.floor(N * 0.95)] - attempts[Math.floor(N * 0.05)];
    // ...and the sockets as the relay accepted them (its pace and scheduling shape these too).
    const accepted = (jittered as number[]).sort((a, b) => a - b);
    const acceptPeak = maxIn100ms(accepted);
    const acceptSpan = accepted[Math.floor(N * 0.95)] - accepted[Math.floor(N * 0.05)];
    // The control group, identical but for the jitter, is a burst by the same measure.
    const lockstep = [...controlFirst.values()].sort((a, b) => a - b);
    expect(lockstep).toHaveLength(CONTROL);
    const lockstepPeak = maxIn100ms(lockstep);
    const lockstepSpan = lockstep[Math.floor(CONTROL * 0.95)] - lockstep[Math.floor(CONTROL * 0.05)];
    const lockstepAccepted = control.phones.map((p) => back.get(p.deviceId)!).sort((a, b) => a - b);

    const report = {
      restartMs: upAt - killedAt,
      phoneBackMs: back.get(deviceId)! - upAt,
      fleetLastBackMs: lastBack - upAt,
      fleetLastTryMs: lastTry - upAt,
      firstAttemptsSpanMs: attempts.at(-1)! - attempts[0],
      attemptSpan5to95Ms: attemptSpan,
      attemptPeakPer100ms: attemptPeak,
      acceptPeakPer100ms: acceptPeak,
      acceptSpan5to95Ms: acceptSpan,
      lockstepPeakPer100ms: lockstepPeak,
      lockstepAttemptSpan5to95Ms: lockstepSpan,
      lockstepAcceptSpanMs: lockstepAccepted.at(-1)! - lockstepAccepted[0],
    };
    console.log(`reconnect: ${JSON.stringify(report)}`);
    // Spread on the wire: 90 % of the first attempts leave over more than half the jitter
    // window (uniform over 3 s: ~2.7 s), where the control group's leave within less than that
    // by the same measure (a burst: 40–180 ms measured). The busiest 100 ms is logged, not
    // asserted, for either group: the phones run in this test process, so on a loaded machine
    // (the full suite's parallel files) a stall of its event loop fires every timer that fell due
    // meanwhile at once (42 of 300 jittered attempts in one window after a ~150 ms stall, when
    // this test ran 300), and the CPU each attempt costs makes a lockstep herd leave over more
    // than one window (26 of 40 in the busiest, over 177 ms). Neither can turn a 3 s spread into a burst or a burst
    // into a 1.5 s spread.
    expect(attemptSpan, JSON.stringify(report)).toBeGreaterThanOrEqual(FLEET_BACKOFF.dropWindowMs / 2);
    expect(lockstepSpan, JSON.stringify(report)).toBeLessThan(FLEET_BACKOFF.dropWindowMs / 2);
    // Relay side: the returns are spread over seconds, not absorbed in one go. (A peak per
    // 100 ms is logged, not asserted: the relay accepts at most ~15 phones per 100 ms here, so
    // even a lockstep herd would pass a 10 % bound, while a scheduling stall of the relay
    // process on a loaded machine can put 30+ spread-out arrivals into one window.)
    expect(acceptSpan, JSON.stringify(report)).toBeGreaterThanOrEqual(2_000);
  }, 110_000);
});

/** tmpfs for the fleet's 2 × N key files: each is fsynced, which on a disk costs seconds. */
function existsShm(): boolean {
  try {
    return statSync('/dev/shm').isDirectory();
  } catch {
    return false;
  }
}
