// A Redis failover under continuous load, on any topology: three relay nodes, one phone on
// each, clients calling every phone through its own node and through another one. The caller
// kills the Redis master (`kill`); this measures and checks what the relay promises
// (docs/decisions/0152-failover-and-epochs.md): every call answered within its deadline,
// failures only relay_unavailable (or a 404 for a session Redis lost) — never device_offline for a
// phone that kept its socket (docs/decisions/0210-no-phone-offline-because-redis-was-down.md) —, every
// node serving again without a restart, phones never disconnected, one owner per phone with
// an epoch that never went backwards.
import { expect } from 'vitest';
import { rawClient, runLoad, startTestCluster, waitFor, type CallRecord, type TestCluster } from './harness.ts';

export const TIMEOUT_MS = 5000;

export function startFailoverCluster(redisUrl: string): Promise<TestCluster> {
  return startTestCluster({ nodes: 3, redisUrl, serveArgs: ['--request-timeout-ms', String(TIMEOUT_MS)] });
}

export interface FailoverFigures {
  calls: number;
  failedByCode: Record<string, number>;
  /** From the kill until every load (every entry node, local and cross-node) had served a call after its last failure. */
  secondsUntilServing: number;
  slowestMs: number;
  phonesLost: number;
  sessionsLost: number;
}

export async function failoverUnderLoad(
  tc: TestCluster,
  kill: () => Promise<string>,
  healthy: () => Promise<boolean>,
): Promise<FailoverFigures> {
  const pids = tc.nodes.map((n) => n.proc.pid);
  const phones = await Promise.all(tc.nodes.map((node, i) => tc.phone({ node, name: `phone ${i}` })));
  const epoch = async (deviceId: string) => Number(await tc.redis.hget(`${tc.ownPrefix}dev:${deviceId}`, 'epoch'));
  const loads = await Promise.all(
    phones.flatMap((phone, i) =>
      [tc.nodes[i], tc.nodes[(i + 1) % 3]].map(async (entry, j) => {
        const token = await tc.key(phone.deviceId);
        const tag = `${j === 0 ? 'local' : 'remote'}${i}`;
        return runLoad({
          client: await rawClient(entry.url, token),
          loops: 2,
          target: () => entry.url,
          tag,
          pauseAfterErrorMs: 50,
          reinitialize: true,
        });
      }),
    ),
  );
  await waitFor(() => loads.every((l) => l.ok() >= 10), 30_000, 'load flowing');
  const epochsBefore = await Promise.all(phones.map((p) => epoch(p.deviceId)));

  const killedAt = Date.now();
  const what = await kill();
  await waitFor(healthy, 30_000, 'the topology healthy again (replica promoted)');
  const promotedAt = Date.now();
  // Every load serves again, for good: a success after its last failure and after the
  // promotion, and no failure for the last 2 s.
  await waitFor(
    () =>
      loads.every((l) => {
        const lastFail = Math.max(killedAt, ...l.records.filter((r) => !r.ok).map((r) => r.end));
        return (
          lastFail < Date.now() - 2000 && l.records.some((r) => r.ok && r.start > lastFail && r.start > promotedAt)
        );
      }),
    30_000,
    'every node serving again',
  );
  const records: CallRecord[] = (await Promise.all(loads.map((l) => l.stop()))).flat();
  const servingAt = Math.max(
    ...loads.map((l) => {
      const lastFail = Math.max(killedAt, ...l.records.filter((r) => !r.ok).map((r) => r.end));
      return l.records.find((r) => r.ok && r.start > lastFail)!.end;
    }),
  );

  const failedByCode: Record<string, number> = {};
  for (const r of records.filter((x) => !x.ok)) failedByCode[r.outcome] = (failedByCode[r.outcome] ?? 0) + 1;
  const figures: FailoverFigures = {
    calls: records.length,
    failedByCode,
    secondsUntilServing: Math.round((servingAt - killedAt) / 100) / 10,
    slowestMs: Math.max(...records.map((r) => r.end - r.start)),
    phonesLost: phones.filter((p) => p.closes.length > 0).length,
    sessionsLost: failedByCode.session_lost ?? 0,
  };
  console.log(`${what}: promoted after ${((promotedAt - killedAt) / 1000).toFixed(1)} s; ${JSON.stringify(figures)}`);

  // Never a hang: every call answered within its deadline (plus the origin's grace).
  expect(figures.slowestMs).toBeLessThan(TIMEOUT_MS + 2500);
  for (const r of records) if (!r.ok) expect(r.outcome, r.detail).toMatch(/^(error:relay_unavailable|session_lost)$/);
  // No node restarted; phones kept their sockets.
  expect(tc.nodes.map((n) => n.proc.pid)).toEqual(pids);
  expect(tc.nodes.every((n) => n.alive)).toBe(true);
  expect(phones.map((p) => p.closes)).toEqual([[], [], []]);
  // One owner per phone, the node that holds its socket, with an epoch that did not go back.
  for (const [i, p] of phones.entries()) {
    await waitFor(
      async () => (await tc.ownerOf(p.deviceId)) === tc.nodes[i].id,
      10_000,
      `phone ${i} owned by its node`,
    );
    expect(await epoch(p.deviceId)).toBeGreaterThanOrEqual(epochsBefore[i]);
  }
  return figures;
}
