// When `phonebridge device run --backend bridge` stops (SIGTERM), the counts of what the bridge
// dropped from its upstream since the last summary are logged: services/device-run.ts closes the
// bridge before it exits (factory.close() -> Upstream.close() -> DropWarnings.close()). Exiting
// without that close lost them.
//
// Promise checked: docs/OPERATIONS.md, "Bridge mode (`device run --backend bridge`)":
//   "Each kind is warned about one by one three times, then counted: one line every 30 s while
//    they go on, `dropped N more non-JSON lines`, and the last count when the bridge stops."
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

beforeAll(async () => {
  relay = await startTestRelay();
  dir = mkdtempSync(join(tmpdir(), 'pb-review-drops-'));
}, 60_000);

afterAll(async () => {
  await child?.kill('SIGKILL');
  try {
    if (upstreamPid) process.kill(upstreamPid, 'SIGKILL');
  } catch {
    // already gone
  }
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('the last count of dropped upstream lines is logged when device run stops', async () => {
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

  const exit = await child.kill('SIGTERM');
  expect(exit.code).toBe(0);
  const stderr = child.stderr.join('\n');
  expect(stderr).toContain('phonebridge device: stopped (stopped)');
  expect(stderr).toContain('dropped 2 more non-JSON lines');
}, 60_000);
