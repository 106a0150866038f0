// A request waiting on an owner node that leaves, crashes or restarts, with the bus messages
// driven in the orders that used to lose it. The owner is a bare bus node (in this process, or
// a child process for a kill -9), so the test decides exactly what it says and when; the
// origin is a real gateway in this process, so the test sees when its bus reports the owner
// gone; the phone comes back on node A (a `phonebridge serve` process).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outcomeWithReason, rawClient, sleep, startTestCluster, waitFor, type TestCluster } from './harness.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';
import { RedisBus } from '../../src/bus/redis/index.ts';
import { quietLog, REDIS_URL } from '../../src/bus/redis/test-support.ts';
import { markHandedOver, MOVE_GRACE_MS, movingKey } from '../../src/gateway/router.ts';
import type { ClusterNode } from '../../services/cluster.ts';

let tc: TestCluster;
let A: ClusterNode;
let O: TestRelay;
const originId = `origin-${process.pid}`;
/** Nodes the origin's bus reported gone, in order. */
const downs: string[] = [];

beforeAll(async () => {
  tc = await startTestCluster({ nodes: 1 });
  [A] = tc.nodes;
  O = await startTestRelay([
    '--redis-url',
    REDIS_URL,
    '--redis-prefix',
    tc.prefix,
    '--database-url',
    tc.databaseUrl,
    '--node-id',
    originId,
  ]);
  // Registered after the origin's router: when it runs, the router has heard the same news.
  O.relay.node.ctx.bus.onNodeDown((n) => downs.push(n));
}, 90_000);

afterAll(async () => {
  await O?.stop();
  await tc?.stop();
}, 60_000);

/** A paired phone, offline for now; `back()` brings it back, on node A. */
async function offlinePhone(name: string) {
  const p = await tc.phone({ node: A, name });
  const token = await tc.key(p.deviceId);
  await p.stop();
  await waitFor(async () => (await tc.ownerOf(p.deviceId)) === undefined, 10_000, 'phone released');
  const control: EchoServerControl = { calls: [], cancellations: 0 };
  const agent = new DeviceAgent({
    stateDir: p.stateDir,
    createServer: () => createEchoServer(control),
    log: silentLogger,
    backoff: { baseMs: 50, capMs: 500 },
  });
  return {
    deviceId: p.deviceId,
    token,
    control,
    async back() {
      agent.start();
      await waitFor(async () => (await tc.ownerOf(p.deviceId)) === A.id, 10_000, 'the phone back on A');
    },
    stop: () => agent.stop(),
  };
}

/** A bare bus node that records the requests other nodes send it (and answers none by itself). */
async function bareNode(id = `z-${process.pid}-${Date.now()}`) {
  const bus = await RedisBus.connect(REDIS_URL, id, quietLog, { prefix: tc.prefix });
  const heard: Array<{ rid: number; id: unknown }> = [];
  bus.onNodeMessage((m) => {
    const h = JSON.parse(m.slice(0, m.indexOf('\n'))) as { t: string; rid: number; id: unknown };
    if (h.t === 'req') heard.push({ rid: h.rid, id: h.id });
  });
  return { bus, heard };
}

/** A bus node in its own process, so it can be killed -9; it claims `deviceId`. */
async function childNode(id: string, deviceId: string, ttlMs = 3000): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('../../src/bus/redis/test-node.ts', import.meta.url))],
    {
      env: {
        ...process.env,
        REDIS_URL,
        PREFIX: tc.prefix,
        NODE_ID: id,
        DEVICE: deviceId,
        NODE_TTL_MS: String(ttlMs),
        HEARTBEAT_MS: '1000',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  await waitFor(() => out.includes('ready'), 20_000, 'child bus node');
  return child;
}

/** Resolves once the origin's heartbeat has run again (its liveness deadline moved). */
async function originHeartbeat(): Promise<void> {
  const key = `${tc.prefix}nodes`;
  const before = await tc.redis.zscore(key, originId);
  await waitFor(async () => (await tc.redis.zscore(key, originId)) !== before, 5000, 'an origin heartbeat');
}

/**
 * Resolves once the origin's bus has answered three commands issued one after another: what
 * its router asked before (the owner lookups after a node went down) has been answered and
 * acted on by then, since one connection answers in order.
 */
async function originCaughtUp(): Promise<void> {
  for (let i = 0; i < 3; i++) await O.relay.node.ctx.bus.peek('barrier');
}

const answer = (id: unknown, text: string) =>
  JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } });

describe('an owner that restarts under the same id', () => {
  it("a request sent to the new process is not failed when the bus reports the old one's process gone", async () => {
    const phone = await offlinePhone('restarted owner');
    const zId = `z-restart-${process.pid}`;
    const old = await childNode(zId, `unrelated-${process.pid}`);
    const client = await rawClient(O.url, phone.token);
    let z: Awaited<ReturnType<typeof bareNode>> | undefined;
    try {
      await originHeartbeat(); // the origin knows the old process
      await originHeartbeat(); // and has a whole heartbeat period ahead before it looks again
      old.kill('SIGKILL');
      z = await bareNode(zId); // the new process: reaps its predecessor's claims, then announces
      await z.bus.claimDevice(phone.deviceId);
      const pending = client.call(O.url, 1, 'echo', { text: 'for the new process' });
      await waitFor(() => z!.heard.length > 0, 10_000, 'the request reached the new process');

      // The origin's next heartbeat sees a new process under the id: the old one is gone.
      await waitFor(() => downs.includes(zId), 10_000, 'the origin heard the old process go');
      await originCaughtUp();
      const { rid, id } = z.heard[0];
      await z.bus.sendToNode(
        originId,
        `${JSON.stringify({ t: 'res', rid })}\n${answer(id, 'answered after the restart')}`,
      );
      expect(outcomeWithReason(await pending)).toBe('answered after the restart');
    } finally {
      old.kill('SIGKILL');
      await client.close();
      await z?.bus.close();
      await phone.stop();
    }
  }, 60_000);
});

/** What a drain scenario drives: Z holds the phone under `epoch`; `call()` sends the one request. */
interface LeavingOwner {
  phone: Awaited<ReturnType<typeof offlinePhone>>;
  z: Awaited<ReturnType<typeof bareNode>>;
  epoch: number;
  call: () => Promise<unknown>;
  /** Resolves once the request has reached Z. */
  reachedZ: () => Promise<void>;
}

/**
 * One request for a phone claimed by a bare node Z that the origin knows, with Z and the phone
 * doing what `script` says (it returns the request's answer); the request must be answered by the phone (back on A), exactly once.
 */
async function leavingOwner(text: string, script: (t: LeavingOwner) => Promise<unknown>): Promise<void> {
  const phone = await offlinePhone(text);
  const z = await bareNode();
  const client = await rawClient(O.url, phone.token);
  try {
    await originHeartbeat(); // the origin knows Z, so it will hear Z go
    const epoch = await z.bus.claimDevice(phone.deviceId);
    const answer = await script({
      phone,
      z,
      epoch,
      call: () => client.call(O.url, 1, 'echo', { text }),
      reachedZ: () => waitFor(() => z.heard.length > 0, 10_000, 'the request reached Z'),
    });
    expect(outcomeWithReason(answer)).toBe(text);
    expect(phone.control.calls.map((c) => c.name)).toEqual(['echo']);
  } finally {
    await client.close();
    await z.bus.close();
    await phone.stop();
  }
}

const goodbye = (z: LeavingOwner['z']) => z.bus.sendToNode(originId, JSON.stringify({ t: 'bye', from: z.bus.nodeId }));
const zGone = (z: LeavingOwner['z']) => waitFor(() => downs.includes(z.bus.nodeId), 10_000, 'the origin heard Z go');

describe('an owner that hands its phone over (drain)', () => {
  it(
    'a request it holds while the phone is claimed elsewhere waits for its `redo`, then reaches the phone',
    () =>
      leavingOwner('after the redo', async ({ phone, z, epoch, call, reachedZ }) => {
        const pending = call();
        await reachedZ();
        await markHandedOver(z.bus, phone.deviceId);
        await z.bus.releaseDevice(phone.deviceId, epoch);
        await phone.back();
        // The origin re-checks the owner of requests older than 0.5 s: let it see A own the phone.
        await sleep(1500);
        await z.bus.sendToNode(originId, JSON.stringify({ t: 'redo', rid: z.heard[0].rid, why: 'moving' }));
        return pending;
      }),
    60_000,
  );

  it(
    'a request that reached it after its goodbye is routed again when the bus reports it gone',
    () =>
      leavingOwner('after the goodbye', async ({ phone, z, epoch, call, reachedZ }) => {
        // The goodbye first, then a request that still found Z as the owner (a lookup that
        // crossed the goodbye): Z never answers it, and leaves.
        await goodbye(z);
        const pending = call();
        await reachedZ();
        await z.bus.releaseDevice(phone.deviceId, epoch);
        await phone.back();
        await z.bus.close();
        await zGone(z);
        return pending;
      }),
    60_000,
  );

  it(
    'a goodbye that reaches the origin after the request went out and after the phone was released: the request waits for the phone',
    () =>
      leavingOwner('goodbye late', async ({ phone, z, epoch, call, reachedZ }) => {
        const pending = call();
        await reachedZ();
        // Z releases the phone without a moving mark, and its goodbye comes after the request.
        await z.bus.releaseDevice(phone.deviceId, epoch);
        await goodbye(z);
        await sleep(300); // the origin routes it again and finds no owner yet
        await phone.back();
        return pending;
      }),
    60_000,
  );

  it(
    'a node that said goodbye and leaves the bus before its phone is claimed again: the request waits for the phone',
    () =>
      leavingOwner('before the claim', async ({ phone, z, epoch, call, reachedZ }) => {
        await goodbye(z);
        const pending = call();
        await reachedZ();
        // Z releases without a moving mark and leaves; only then does the phone come back.
        await z.bus.releaseDevice(phone.deviceId, epoch);
        await z.bus.close();
        await zGone(z);
        await phone.back();
        return pending;
      }),
    60_000,
  );

  it('a request published to it after it stopped listening (killed while draining) waits for the phone', async () => {
    const phone = await offlinePhone('owner killed while draining');
    const zId = `z-killed-${process.pid}`;
    const z = await childNode(zId, phone.deviceId);
    const client = await rawClient(O.url, phone.token);
    try {
      // Z marked the phone as moving (through any bus connection: the mark is shared), then
      // died: it stays the owner until its liveness lapses (3 s), but nobody hears its channel.
      await O.relay.node.ctx.bus.hit(movingKey(phone.deviceId), MOVE_GRACE_MS);
      z.kill('SIGKILL');
      await new Promise((r) => z.once('exit', r));
      const pending = client.call(O.url, 1, 'echo', { text: 'after the owner died' });
      await sleep(300); // the origin finds Z as the owner and publishes to its dead channel
      await phone.back();
      expect(outcomeWithReason(await pending)).toBe('after the owner died');
      expect(phone.control.calls.map((c) => c.name)).toEqual(['echo']);
    } finally {
      z.kill('SIGKILL');
      await client.close();
      await phone.stop();
    }
  }, 60_000);
});

describe('an owner killed while its liveness has not lapsed', () => {
  it('a request published to its channel comes back unheard at once: relay_unavailable, not a wait until the deadline', async () => {
    const phone = await offlinePhone('owner killed, still alive on the bus');
    // Alive on the bus for a minute after the kill: only the request's own bounce (or its
    // publish's receiver count) can tell the origin nobody heard it
    // (docs/decisions/0225-quiet-requests.md).
    const z = await childNode(`z-unheard-${process.pid}`, phone.deviceId, 60_000);
    const client = await rawClient(O.url, phone.token);
    try {
      z.kill('SIGKILL');
      await new Promise((r) => z.once('exit', r));
      const answer = await client.call(O.url, 1, 'echo', { text: 'to a dead owner' });
      expect(outcomeWithReason(answer)).toMatch(
        /^error:relay_unavailable \(.*the node holding the phone is unreachable\)$/,
      );
      expect(phone.control.calls).toEqual([]);
    } finally {
      z.kill('SIGKILL');
      await client.close();
      await phone.stop();
      await tc.redis.zrem(`${tc.prefix}nodes`, `z-unheard-${process.pid}`);
    }
  }, 60_000);
});

describe('a phone that moves again while its moving mark lives', () => {
  it("its next node's mark lives MOVE_GRACE_MS from then, not until the first mark's end", async () => {
    const deviceId = `moved-twice-${process.pid}`;
    const key = `${tc.prefix}rl:${movingKey(deviceId)}`;
    // Two drains 2 s apart: the phone moved off one node, then off the next.
    await O.relay.node.ctx.router.markMoving(deviceId);
    await sleep(2000);
    await O.relay.node.ctx.router.markMoving(deviceId);
    expect(await tc.redis.pttl(key)).toBeGreaterThan(MOVE_GRACE_MS - 1000);
    expect(await O.relay.node.ctx.bus.peek(movingKey(deviceId))).toBeGreaterThan(0);
  }, 20_000);
});
