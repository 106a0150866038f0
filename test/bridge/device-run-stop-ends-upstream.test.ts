// `phonebridge device run --backend bridge` closes its bridge when it stops (SIGTERM, or the agent
// stopping for good): services/device-run.ts awaits factory.close() before process.exit(). Without
// it, a stdio upstream that does not exit on its closed stdin was left running as an orphan after
// `device run` was gone.
//
// Promises checked:
// - src/device/bridge/index.ts, BridgeServerFactory: "close(): ... also stops the shared upstream."
// - src/device/bridge/upstream.ts, connect(): "the bridge waits, so a server that ignores its closed
//   stdin is not left running when `device run` exits"
// - docs/OPERATIONS.md "Bridge mode": an upstream that does not answer is "ended (stdin closed, then
//   SIGTERM and SIGKILL after 2 s each)" — the way the bridge ends its upstream (Upstream.close()).
// - DESIGN.md contract: `device run` "the reference phone: pairs once ..., then stays connected";
//   stopping it (SIGTERM) must not leave a process of its own behind (brief: no leaked child processes).
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
  dir = mkdtempSync(join(tmpdir(), 'pb-review-run-'));
}, 60_000);

afterAll(async () => {
  await child?.kill('SIGKILL');
  if (upstreamPid && alive(upstreamPid)) process.kill(upstreamPid, 'SIGKILL');
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('SIGTERM to `device run --backend bridge` ends its stdio upstream too', async () => {
  const pidFile = join(dir, 'upstream.pid');
  const stateDir = join(dir, 'state');
  const qr = await relay.pair('bridge-phone');
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
    `'${process.execPath}' '${FIXTURE}' '${pidFile}'`,
  ]);
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
  expect(exit.code, child.stderr.join('\n')).toBe(0);

  // Upstream.close() ends a stubborn server within ~4 s (stdin closed, SIGTERM after 2 s).
  // Poll well past that; the upstream must be gone.
  const deadline = Date.now() + 10_000;
  while (alive(upstreamPid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(alive(upstreamPid), `upstream pid ${upstreamPid} still running after device run exited`).toBe(false);
}, 60_000);
