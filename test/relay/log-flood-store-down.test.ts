// docs/OPERATIONS.md, "Logs": "rejected phone upgrades — which anyone can cause — log at most 20
// lines per 10 s per node; the next line says how many were `dropped`", the upgrades the relay
// could not check itself (database unreachable, 1011) included; docs/SECURITY.md, "the logs
// (flooding, leaking) | anyone | … rejected upgrades at most 20 lines per 10 s per node".
// Anyone can get a nonce for any id (POST /device/challenge), so while the store is down anyone
// can make upgrades the relay rejects with 1011: their `device auth failed on the relay` lines
// are under the same throttle as the other rejections (src/gateway/device-socket.ts).
import { afterAll, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createLogger } from '../../src/log.ts';
import { REJECTED_LOG_LINES } from '../../src/gateway/device-socket.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { challenge, openSocket } from '../helpers/raw-device.ts';
import { startToxiproxy, type Toxiproxy } from '../helpers/toxiproxy.ts';
import { createDatabase } from '../cluster/harness.ts';

let tp: Toxiproxy | undefined;
let db: { url: string; drop(): Promise<void> } | undefined;
let relay: TestRelay | undefined;
const lines: string[] = [];
afterAll(async () => {
  await relay?.stop().catch(() => {});
  await tp?.stop();
  await db?.drop().catch(() => {});
}, 30_000);

it('a flood of upgrades while the store is down logs at most 20 lines per 10 s', async () => {
  db = await createDatabase();
  tp = await startToxiproxy();
  const proxy = await tp.proxy('pg', '127.0.0.1:5432');
  relay = await startTestRelay(['--database-url', proxy.through(db.url)], {
    log: createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(l) } }),
  });
  await proxy.setEnabled(false);
  const before = lines.length;
  const N = 3 * REJECTED_LOG_LINES;
  const codes = await Promise.all(
    Array.from({ length: N }, async () => {
      const deviceId = `dev_${randomBytes(8).toString('hex')}`;
      const nonce = await challenge(relay!.url, deviceId);
      const s = await openSocket(relay!.url, {
        'x-device-id': deviceId,
        'x-device-nonce': nonce,
        'x-device-ts': String(Math.floor(Date.now() / 1000)),
        'x-device-sig': 'c2ln',
        'x-device-app': 'flood/1',
      });
      return (await s.closed).code;
    }),
  );
  await proxy.setEnabled(true);
  expect(codes.every((c) => c === 1011 || c === 4003)).toBe(true);
  const written = lines.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
  const aboutUpgrades = written.filter(
    (l) => l.msg === 'device auth failed on the relay' || l.msg === 'device socket rejected',
  );
  // All of this within a few seconds: one window of the throttle.
  const failed = aboutUpgrades.filter((l) => l.msg === 'device auth failed on the relay');
  expect(
    aboutUpgrades.length,
    `${failed.length} 'device auth failed on the relay' lines + ${aboutUpgrades.length - failed.length} 'device socket rejected' for ${N} upgrades; close codes ${[...new Set(codes)].join(', ')}`,
  ).toBeLessThanOrEqual(REJECTED_LOG_LINES);
  // The relay's own fault still reaches the log, at error, naming the phone it could not check.
  expect(codes).toContain(1011);
  expect(failed.length).toBeGreaterThan(0);
  expect(failed[0].level).toBe(50);
  expect(String(failed[0].deviceId)).toMatch(/^dev_[0-9a-f]{16}$/);
}, 30_000);
