// `phonebridge device run --backend bridge` closes its bridge when it stops (SIGTERM, or the agent
// stopping for good): services/device-run.ts awaits factory.close() before process.exit(). Exiting
// without that close left a stdio upstream that ignores its closed stdin running as an orphan, and
// lost the last counts of what the bridge dropped from it.
//
// Promises checked:
// - src/device/bridge/index.ts, BridgeServerFactory: "close(): ... also stops the shared upstream."
// - docs/OPERATIONS.md "Bridge mode": an upstream is "ended (stdin closed, then SIGTERM and SIGKILL
//   after 2 s each)"; dropped lines are "warned about one by one three times, then counted: one line
//   every 30 s while they go on, `dropped N more non-JSON lines`, and the last count when the bridge
//   stops."
// - services/device-run.ts: `device run` is the reference phone; stopping it must leave no process
//   of its own behind.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';

const FIXTURE = fileURLToPath(new URL('./stubborn-upstream.mjs', import.meta.url));

let relay: TestRelay;
let dir: string;
let child: Child | undefined;
let upstreamPid: number | undefined;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  relay = await startTestRelay();
  dir = mkdtempSync(join(tmpdir(), 'pb-device-run-stop-'));
}, 60_000);

afterAll(async () => {
  await child?.kill('SIGKILL');
  if (upstreamPid && alive(upstreamPid)) process.kill(upstreamPid, 'SIGKILL');
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('SIGTERM ends its stdio upstream too and logs the last count of dropped lines', async () => {
  const pidFile = join(dir, 'upstream.pid');
  const stateDir = join(dir, 'state');
  const qr = await relay.pair('bridge-phone');
  // The upstream writes 5 non-JSON lines after initialize: 3 are warned one by one, 2 are counted.
  child = startChild([
    'device',
    'run',
    '--state',
    stateDir,
    '--pair',
    JSON.stringify(qr),
    '--backend',
    'bridge',
    '--upstream-cmd',
    `'${process.execPath}' '${FIXTURE}' '${pidFile}' 5`,
  ]);
  await waitFor(
    () => child!.stderr.filter((l) => l.includes('dropped a line that is not JSON')).length === 3,
    30_000,
    'the three one-by-one warnings',
  );
  // Paired and connected: the relay holds the phone's initialize result.
  await waitFor(
    () => {
      try {
        const id = JSON.parse(readFileSync(join(stateDir, 'device.json'), 'utf8')).device_id as string;
        return !!relay.relay.node.ctx.hub.device(id)?.initResult;
      } catch {
        return false;
      }
    },
    30_000,
    'the bridged phone to connect',
  );
  upstreamPid = Number(readFileSync(pidFile, 'utf8'));
  expect(alive(upstreamPid)).toBe(true);

  const exit = await child.kill('SIGTERM');
  const stderr = child.stderr.join('\n');
  expect(exit.code, stderr).toBe(0);
  expect(stderr).toContain('phonebridge device: stopped (stopped)');
  expect(stderr).toContain('dropped 2 more non-JSON lines');

  // Upstream.close() ends a stubborn server within ~4 s (stdin closed, SIGTERM after 2 s).
  // Poll well past that; the upstream must be gone.
  const deadline = Date.now() + 10_000;
  while (alive(upstreamPid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(alive(upstreamPid), `upstream pid ${upstreamPid} still running after device run exited`).toBe(false);
}, 60_000);
