// Losing a node: kill -9 of the node holding a phone in the middle of a stream of calls, and a
// SIGTERM drain under load. Three `phonebridge serve` processes behind the round-robin front;
// phones paired with the front, so they come back through it to a surviving node.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawClient, runLoad, sleep, startTestCluster, waitFor, type TestCluster } from './harness.ts';

let tc: TestCluster;
const DRAIN_MS = 5000;

beforeAll(async () => {
  tc = await startTestCluster({
    nodes: 3,
    serveArgs: ['--request-timeout-ms', '10000', '--drain-ms', String(DRAIN_MS)],
  });
}, 90_000);

afterAll(async () => {
  await tc?.stop();
}, 60_000);

/** One empty connection through the front: moves its round robin on by one. */
function poke(url: string): Promise<void> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = connect({ host: hostname, port: Number(port) }, () => s.end());
    s.on('close', () => resolve());
    s.on('error', () => resolve());
  });
}

const CLEAR = /^error:(device_offline|relay_unavailable)$/;

describe('kill -9 of the node holding the phone', () => {
  it('fails the calls in flight within 5 s with a clear error; the phone comes back on a survivor; the session lives on', async () => {
    const phone = await tc.phone({ name: 'roaming' });
    const X = tc.node((await tc.ownerOf(phone.deviceId))!);
    const survivors = tc.nodes.filter((n) => n !== X);
    const token = await tc.key(phone.deviceId);
    const client = await rawClient(survivors[0].url, token);

    const load = runLoad({
      client,
      loops: 6,
      target: (loop) => survivors[loop % 2].url,
      sleepMs: () => 300,
      pauseAfterErrorMs: 50,
    });
    await waitFor(() => load.ok() >= 12, 20_000, 'calls flowing through the doomed node');
    const killedAt = Date.now();
    X.proc.kill('SIGKILL');
    await X.exited;
    await waitFor(
      async () => {
        const owner = await tc.ownerOf(phone.deviceId);
        return owner !== undefined && owner !== X.id;
      },
      15_000,
      'the phone reconnected to a survivor',
    );
    const backAt = Date.now();
    await waitFor(
      () => load.records.filter((r) => r.start >= backAt && r.ok).length >= 6,
      15_000,
      'calls succeeding again',
    );
    const records = await load.stop();

    const inFlight = records.filter((r) => r.start < killedAt && r.end >= killedAt);
    const failed = records.filter((r) => !r.ok);
    const slowest = Math.max(...inFlight.map((r) => r.end - killedAt));
    console.log(
      `kill -9: ${inFlight.length} calls in flight, all answered within ${slowest} ms (${inFlight
        .filter((r) => !r.ok)
        .map((r) => r.outcome)
        .join(', ')}); ` +
        `phone back on ${await tc.ownerOf(phone.deviceId)} ${backAt - killedAt} ms after the kill; ${failed.length} failed calls of ${records.length}`,
    );
    expect(inFlight.length).toBeGreaterThan(0);
    for (const r of inFlight) {
      expect(r.end - killedAt).toBeLessThan(5000);
      if (!r.ok) expect(r.outcome).toMatch(CLEAR);
    }
    for (const r of failed) expect(r.outcome).toMatch(CLEAR); // never a hang, a timeout or a transport error
    expect(phone.closes).toContain(1006);

    // Same session, no re-initialize, on every survivor and through the front.
    for (const base of [...survivors.map((n) => n.url), tc.url]) {
      const r = await client.call(base, `after-${base}`, 'echo', { text: 'still my session' });
      expect(r.result?.content?.[0]?.text).toBe('still my session');
    }
    await client.close();
    await phone.stop();

    // The node comes back under the same id, for the next test.
    await tc.cluster.startNode(X.index);
  }, 90_000);
});

describe('SIGTERM drain under load', () => {
  it(
    'fails no request that started before the drain deadline; the phones move to other nodes',
    { timeout: 90_000 },
    async () => {
      const phones = [];
      for (let i = 0; i < 4; i++) {
        phones.push(await tc.phone({ name: `fleet ${i}` }));
        await poke(tc.url); // each phone opens three connections (pair, challenge, socket): shift the round robin so they spread
      }
      const owners = await Promise.all(phones.map((p) => tc.ownerOf(p.deviceId)));
      const byNode = new Map<string, number>();
      for (const o of owners) byNode.set(o!, (byNode.get(o!) ?? 0) + 1);
      const victimId = [...byNode.entries()].sort((a, b) => b[1] - a[1])[0][0];
      const V = tc.node(victimId);
      const moving = phones.filter((_, i) => owners[i] === victimId);
      console.log(`phones per node: ${JSON.stringify(Object.fromEntries(byNode))}`);

      // One session per phone, through the front (keep-alive connections land on every node, V included).
      const clients = await Promise.all(
        phones.map(async (p) => rawClient(tc.url, await tc.key(p.deviceId), { maxSockets: 4 })),
      );
      const loads = clients.map((client, i) =>
        runLoad({ client, loops: 4, target: () => tc.url, sleepMs: (n) => (n % 3 === 0 ? 400 : 20), tag: `p${i}` }),
      );
      await waitFor(() => loads.every((l) => l.ok() >= 10), 20_000, 'load on every phone');

      const termAt = Date.now();
      V.proc.kill('SIGTERM');
      const exit = await V.exited;
      const exitedAt = Date.now();
      await waitFor(
        async () => {
          const now = await Promise.all(moving.map((p) => tc.ownerOf(p.deviceId)));
          return now.every((o) => o !== undefined && o !== victimId);
        },
        15_000,
        'the phones moved',
      );
      await sleep(1000); // more load on the phones' new nodes
      const all = (await Promise.all(loads.map((l) => l.stop()))).flat();

      const beforeDeadline = all.filter((r) => r.start < termAt + DRAIN_MS);
      const failures = beforeDeadline.filter((r) => !r.ok);
      const during = all.filter((r) => r.start >= termAt && r.start < exitedAt);
      const worst = Math.max(...all.filter((r) => r.end >= termAt).map((r) => r.end - r.start));
      console.log(
        `SIGTERM: ${V.id} (holding ${moving.length} of 4 phones) exited ${exit.code} after ${exitedAt - termAt} ms; ` +
          `${all.length} calls, ${during.length} started while it drained, ${failures.length} failed; slowest call around the move ${worst} ms`,
      );
      for (const f of failures.slice(0, 10))
        console.error(
          `failed: +${f.start - termAt} ms .. +${f.end - termAt} ms: ${f.outcome} ${f.detail ?? ''} (expected ${f.expected})`,
        );
      expect(exit.code).toBe(0);
      expect(exitedAt - termAt).toBeLessThan(DRAIN_MS + 2000);
      expect(failures).toEqual([]);
      for (const p of moving) expect(p.closes).toContain(1012);
      await Promise.all(clients.map((c) => c.close()));
    },
  );
});
