// Several nodes on one real Redis: routing, supersede, liveness, outages.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { busPublish } from '../../metrics.ts';
import { BusTimeoutError, BusUnavailableError } from '../errors.ts';
import { RedisBus, type RedisBusOptions } from './index.ts';
import { QUIET_REQUESTS_PER_TURN } from './node-outbox.ts';
import { ridHead, ridHeaderLine } from '../formats.ts';
import { NumberedLine } from '../numbered-line.ts';
import { dropPrefix, quietLog, randomPrefix, REDIS_URL, ScratchRedis, sleep, waitFor } from './test-support.ts';

const prefix = randomPrefix();
const fast = { prefix, nodeTtlMs: 600, heartbeatMs: 150 } satisfies RedisBusOptions;
/**
 * For a node whose start waits for its peers (docs/decisions/0245): a bound of three of its own
 * heartbeat periods that a loaded machine's late timers of `fast` peers stay well within.
 */
const patient = { prefix, nodeTtlMs: 5000, heartbeatMs: 500 } satisfies RedisBusOptions;
const open: RedisBus[] = [];
const uid = () => randomBytes(4).toString('hex');

async function node(id = `n-${uid()}`, opts: RedisBusOptions = fast, url = REDIS_URL): Promise<RedisBus> {
  const b = await RedisBus.connect(url, id, quietLog, opts);
  open.push(b);
  return b;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((b) => b.close()));
});

/** Two nodes, b's quiet connection ready, each node's messages (as strings) collected. */
async function twoListening(): Promise<{ a: RedisBus; b: RedisBus; atA: string[]; atB: string[] }> {
  const [a, b] = [await node(), await node()];
  await waitFor(() => b.quietReady, 2000, 'the quiet connection');
  const atA: string[] = [];
  const atB: string[] = [];
  a.onNodeMessage((m) => atA.push(m));
  b.onNodeMessage((m) => atB.push(m));
  return { a, b, atA, atB };
}
afterAll(() => dropPrefix(prefix));

/** Redis' id for the connection named `name` (CLIENT LIST), to kill it. */
/** A bus node in its own process (test-node.ts) with the `fast` timings, claiming `device`; once it is ready. */
async function nodeProcess(
  nodeId: string,
  device: string,
  url = REDIS_URL,
  timings: { nodeTtlMs: number; heartbeatMs: number } = fast,
): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./test-node.ts', import.meta.url))],
    {
      env: {
        ...process.env,
        REDIS_URL: url,
        PREFIX: prefix,
        NODE_ID: nodeId,
        DEVICE: device,
        NODE_TTL_MS: String(timings.nodeTtlMs),
        HEARTBEAT_MS: String(timings.heartbeatMs),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  await waitFor(() => out.includes('ready'), 15_000, 'child node');
  return child;
}

/**
 * Until each of `peers` has renewed itself since node `id` last did (the bus's `beats` record):
 * their heartbeats have read the live nodes with `id` among them.
 */
async function heardBy(peers: RedisBus[], id: string, url = REDIS_URL): Promise<void> {
  const admin = new Redis(url);
  try {
    const beat = async (n: string) => Number(await admin.hget(`${prefix}beats`, n));
    const since = await beat(id);
    await waitFor(async () => (await Promise.all(peers.map((p) => beat(p.nodeId)))).every((t) => t > since));
  } finally {
    admin.disconnect();
  }
}

async function clientId(admin: Redis, name: string): Promise<string> {
  const line = String(await admin.client('LIST'))
    .split('\n')
    .find((l) => l.includes(`name=${name} `));
  const id = /\bid=(\d+)/.exec(line ?? '')?.[1];
  expect(id).toBeDefined();
  return id!;
}

/** Redis' id for `bus`'s quiet connection. */
const quietClientId = (admin: Redis, bus: RedisBus) => clientId(admin, `phonebridge:${bus.nodeId}:quiet`);

/** A node on a Redis user that may run every command but what `rule` denies ('-eval'). */
async function nodeAs(admin: Redis, user: string, rule: string): Promise<RedisBus> {
  await admin.acl('SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', rule);
  const url = new URL(REDIS_URL);
  url.username = user;
  url.password = 'pw';
  return node(`n-${uid()}`, fast, url.toString());
}

describe('RedisBus across nodes', () => {
  it('control events reach every node, the publisher included, exactly once', async () => {
    const [a, b] = [await node(), await node()];
    const got = { a: [] as unknown[], b: [] as unknown[] };
    a.onControl((e) => got.a.push(e));
    b.onControl((e) => got.b.push(e));
    await a.publishControl({ type: 'device_removed', deviceId: 'd1' });
    await b.publishControl({ type: 'account_locked', accountId: 'acc', locked: true });
    await waitFor(() => got.a.length >= 2 && got.b.length >= 2, 5000, 'both control events on both nodes');
    await sleep(100); // a second copy would be here by now
    const all = [
      { type: 'device_removed', deviceId: 'd1' },
      { type: 'account_locked', accountId: 'acc', locked: true },
    ];
    expect(got.a).toEqual(all);
    expect(got.b).toEqual(all);
  });

  it('a claim Redis lost (a promoted replica that missed it) is restored at its epoch on reclaim', async () => {
    const [a, b] = [await node(), await node()];
    const d = uid();
    const eb = await b.claimDevice(d);
    const superseded: Array<[string, number]> = [];
    b.onSuperseded((dev, e) => superseded.push([dev, e]));
    const ea = await a.claimDevice(d);
    await waitFor(() => superseded.length === 1, 2000, 'b superseded by the claim');
    // The replica had only b's claim when it was promoted.
    const admin = new Redis(REDIS_URL);
    try {
      await admin.hset(`${prefix}dev:${d}`, 'node', b.nodeId, 'epoch', eb);
    } finally {
      admin.disconnect();
    }
    expect(await b.reclaimDevice(d, eb)).toBe(eb); // the record names b at its epoch: kept, as on a healthy Redis
    // a holds the newer claim: restored at its epoch, never a lower one; b is told again.
    expect(await a.reclaimDevice(d, ea)).toBe(ea);
    expect(await a.ownerOf(d)).toEqual({ nodeId: a.nodeId, epoch: ea });
    await waitFor(() => superseded.length === 2, 2000, 'b superseded by the restore');
    expect(superseded[1]).toEqual([d, ea]);
    // The restored claim is b's newer one now: b's stale epoch is refused.
    expect(await b.reclaimDevice(d, eb)).toBeUndefined();
    expect(await a.claimDevice(d)).toBe(ea + 1);
  });

  it('a nonce raced by many takers on two nodes has one winner', async () => {
    const [a, b] = [await node(), await node()];
    const nonce = uid();
    await a.putNonce(nonce, 'dev', 10_000);
    const got = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).takeNonce(nonce)));
    expect(got.filter(Boolean)).toEqual(['dev']);
  });

  it('sessions and counters are shared between nodes', async () => {
    const [a, b] = [await node(), await node()];
    const id = uid();
    await a.sessions.create(
      {
        id,
        deviceId: 'd',
        tokenId: 't',
        accountId: 'x',
        revision: '2025-06-18',
        scopes: [],
        createdAt: 1,
        lastSeenAt: 1,
      },
      10_000,
    );
    expect(await b.sessions.touch(id, 10_000)).toMatchObject({ id, scopes: [] });
    const k = uid();
    await a.hit(k, 10_000);
    expect(await b.hit(k, 10_000)).toBe(2);
  });

  it('claiming on another node supersedes the old owner, which can then neither release nor reclaim', async () => {
    const [a, b] = [await node(), await node()];
    const d = uid();
    const seen = { a: [] as Array<[string, number]>, b: [] as Array<[string, number]> };
    a.onSuperseded((dev, e) => seen.a.push([dev, e]));
    b.onSuperseded((dev, e) => seen.b.push([dev, e]));
    const e1 = await a.claimDevice(d);
    const e2 = await b.claimDevice(d);
    expect(e2).toBe(e1 + 1);
    await waitFor(() => seen.a.length > 0, 1000, 'supersede');
    expect(seen.a).toEqual([[d, e2]]);
    expect(seen.b).toEqual([]);
    expect(await a.ownerOf(d)).toEqual({ nodeId: b.nodeId, epoch: e2 });
    expect(await a.releaseDevice(d, e1)).toBe(false); // stale epoch: a no-op
    expect(await a.reclaimDevice(d, e1)).toBeUndefined(); // B is alive and owns it
    expect(await b.ownerOf(d)).toEqual({ nodeId: b.nodeId, epoch: e2 });
  });

  it('replies published without their Redis answers arrive in order, bytes intact, and resolve once Redis confirms them', async () => {
    const [a, b] = [await node(), await node()];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const got: Buffer[] = [];
    a.onNodeBytes((m, s, e) => got.push(Buffer.from(m.subarray(s, e))));
    const frame = Buffer.from('{"result":{"text":"héllo ✓"},"id":3}');
    const sent = Array.from({ length: 50 }, (_, i) => b.replyToNode(a.nodeId, `{"t":"res","rid":${i}}\n`, frame));
    await Promise.all(sent);
    await waitFor(() => got.length === 50, 2000, 'every reply');
    expect(got.map((m) => m.toString())).toEqual(
      Array.from({ length: 50 }, (_, i) => `{"t":"res","rid":${i}}\n${frame.toString()}`),
    );
    // Replies are off on that connection: the answers it gets are only the confirmations.
    const admin = new Redis(REDIS_URL);
    try {
      const list = String(await admin.client('LIST'));
      expect(list).toMatch(new RegExp(`name=phonebridge:${b.nodeId}:quiet`));
    } finally {
      admin.disconnect();
    }
    // A message to a node nobody listens for still resolves (nobody acts on who heard it).
    await b.replyToNode('nobody', 'x');
  });

  it('quiet replies of every size, multi-byte heads included, keep their order and bytes in one turn', async () => {
    const [a, b] = [await node(), await node()];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const got: Buffer[] = [];
    a.onNodeBytes((m, s, e) => got.push(Buffer.from(m.subarray(s, e))));
    // Empty, tiny and large payloads (up to 200 KiB) in one turn's writes (quiet.ts).
    const sizes = [0, 1, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 200 * 1024, 3];
    const frames = sizes.map((n, i) => Buffer.alloc(n, 97 + i));
    const heads = sizes.map((_, i) => `{"t":"res","rid":${i},"why":"é✓"}\n`);
    await Promise.all(frames.map((f, i) => b.replyToNode(a.nodeId, heads[i], f.length ? f : undefined)));
    await waitFor(() => got.length === sizes.length, 5000, 'every reply');
    expect(got.map((m) => m.toString())).toEqual(frames.map((f, i) => heads[i] + f.toString()));
  });

  it('a quiet reply whose connection closes before Redis confirmed it rejects as unavailable, and the next one still goes', async () => {
    const [a, b] = [await node(), await node(`n-${uid()}`, { ...fast, quietConfirmMs: 60_000 })];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const got: string[] = [];
    a.onNodeMessage((m) => got.push(m));
    const admin = new Redis(REDIS_URL);
    try {
      const id = await quietClientId(admin, b);
      const pending = b.replyToNode(a.nodeId, 'first');
      const outcome = pending.then(
        () => 'resolved',
        (err: unknown) => err,
      );
      await waitFor(() => got.length === 1, 2000, 'the first reply'); // delivered, not yet confirmed
      await admin.client('KILL', 'ID', id);
      // Unconfirmed when its connection went: the caller must send it again (as after a
      // publish whose reply never came).
      expect(await outcome).toBeInstanceOf(BusUnavailableError);
      // Meanwhile (reconnecting) replies take the command connection; either way they go.
      void b.replyToNode(a.nodeId, 'second').catch(() => {});
      await waitFor(() => got.length === 2, 2000, 'the second reply');
      expect(got).toEqual(['first', 'second']);
      await waitFor(() => b.quietReady, 5000, 'the quiet connection back');
      void b.replyToNode(a.nodeId, 'third').catch(() => {}); // confirmed only after 60 s: not awaited
      await waitFor(() => got.length === 3, 2000, 'the third reply');
      expect(got[2]).toBe('third');
    } finally {
      admin.disconnect();
    }
  });

  it('a request alone in its turn goes without its Redis reply: heard, it arrives and bounces nothing; unheard, its bounce comes back', async () => {
    const [a, b] = [await node(), await node()];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const atA: Buffer[] = [];
    const atB: string[] = [];
    a.onNodeBytes((m, s, e) => atA.push(Buffer.from(m.subarray(s, e))));
    b.onNodeMessage((m) => atB.push(m));
    const frame = Buffer.from('{"name":"echo","arguments":{"text":"héllo ✓"}}');
    for (const [i, n] of [0, 16 * 1024, 200 * 1024].entries())
      expect(
        await b.sendOrBounce(
          a.nodeId,
          `{"t":"req","rid":${i}}\n`,
          n ? Buffer.alloc(n, 120) : frame,
          `{"t":"unheard","rid":${i}}\n`,
        ),
      ).toBe(true);
    // A follow-up sent once its request was taken (as the router sends a cancel) comes after it.
    await b.replyToNode(a.nodeId, '{"t":"cancel","rid":2}\n');
    // Alone in its turn, a request to nobody resolves true: the sender hears of it from the bounce.
    const timed = busPublish.count;
    expect(await b.sendOrBounce('nobody', '{"t":"req","rid":3}\n', frame, '{"t":"unheard","rid":3}\n')).toBe(true);
    expect(busPublish.count).toBe(timed + 1); // timed by its batch's confirmation
    await waitFor(() => atA.length === 4 && atB.length === 1, 2000, 'the requests and the bounce');
    expect(atA.map((m) => m.subarray(0, m.indexOf(0x0a) + 1).toString())).toEqual([
      '{"t":"req","rid":0}\n',
      '{"t":"req","rid":1}\n',
      '{"t":"req","rid":2}\n',
      '{"t":"cancel","rid":2}\n',
    ]);
    expect(atA[0].subarray(atA[0].indexOf(0x0a) + 1).toString()).toBe(frame.toString());
    expect(atA[2].length).toBe('{"t":"req","rid":2}\n'.length + 200 * 1024);
    expect(atB).toEqual(['{"t":"unheard","rid":3}\n']);
  });

  it('messages to peers taking turns reach each its own peer, in one turn and across turns (channels kept per peer)', async () => {
    const [a, b, c] = [await node(), await node(), await node()];
    await waitFor(() => c.quietReady, 2000, 'the quiet connection');
    const at = new Map<string, string[]>([
      [a.nodeId, []],
      [b.nodeId, []],
      [c.nodeId, []],
    ]);
    for (const n of [a, b, c]) n.onNodeMessage((m) => at.get(n.nodeId)!.push(m));
    const frame = Buffer.from('{"result":{},"id":1}');
    // Ids made anew for each message (as read off the wire): equal text, other string objects.
    const peer = (n: RedisBus) => `${n.nodeId.slice(0, 2)}${n.nodeId.slice(2)}`;
    for (let round = 0; round < 3; round++) {
      const sends: Promise<unknown>[] = [];
      for (const [i, n] of [a, b, a, b].entries()) {
        sends.push(c.replyToNode(peer(n), `{"t":"res","rid":${round * 10 + i}}\n`, frame));
        // One request in the turn: it goes as the quiet script, with the bounce for nobody.
        if (i === 1) sends.push(c.sendOrBounce(peer(n), `{"t":"req","rid":${round}}\n`, frame, 'x'));
      }
      sends.push(
        c.sendOrBounce('nobody', `{"t":"req","rid":${100 + round}}\n`, frame, `{"t":"unheard","rid":${round}}\n`),
      );
      await Promise.all(sends);
      await sleep(5); // the next round in another turn
    }
    await waitFor(() => at.get(a.nodeId)!.length === 6 && at.get(b.nodeId)!.length === 9, 3000, 'every message');
    await waitFor(() => at.get(c.nodeId)!.length === 3, 3000, 'the bounces');
    const heads = (id: string) => at.get(id)!.map((m) => m.slice(0, m.indexOf('\n')));
    expect(heads(a.nodeId)).toEqual([0, 2, 10, 12, 20, 22].map((rid) => `{"t":"res","rid":${rid}}`));
    expect(heads(b.nodeId).filter((h) => h.includes('"res"'))).toEqual(
      [1, 3, 11, 13, 21, 23].map((rid) => `{"t":"res","rid":${rid}}`),
    );
    expect(heads(b.nodeId).filter((h) => h.includes('"req"'))).toEqual([0, 1, 2].map((r) => `{"t":"req","rid":${r}}`));
    expect(heads(c.nodeId)).toEqual([0, 1, 2].map((r) => `{"t":"unheard","rid":${r}}`));
  });

  it('a NumberedLine head arrives as its text, on every path: a quiet reply, a counted send, a request and its bounce', async () => {
    const { a, b, atA, atB } = await twoListening();
    const frame = Buffer.from('{"result":{"text":"é"},"id":1}');
    // Written as bytes with the numbers between them, or (a number the digit writer does not take:
    // negative, fractional, past 2^53) as the text.
    const rids = [0, 7, 10, 1_234_567_890, 9_999_999_999, 10_000_000_000, Number.MAX_SAFE_INTEGER, 1.5, -1];
    const request = (rid: number) => new NumberedLine(['{"t":"req","rid":', ',"n":', ',"é":"✓"}\n'], [rid, rid + 1]);
    for (const rid of rids) {
      await b.replyToNode(a.nodeId, ridHead('res', rid), frame);
      expect(await b.sendToNode(a.nodeId, ridHead('rel', rid), frame)).toBe(true);
      expect(await b.sendOrBounce(a.nodeId, request(rid), frame, ridHead('unheard', rid))).toBe(true);
      expect(await b.sendOrBounce('nobody', request(rid), frame, ridHead('unheard', rid))).toBe(true);
    }
    await waitFor(() => atA.length === 3 * rids.length && atB.length === rids.length, 3000, 'every message');
    expect(atA).toEqual(
      rids.flatMap((rid) => [
        ridHeaderLine('res', rid) + frame.toString(),
        ridHeaderLine('rel', rid) + frame.toString(),
        `{"t":"req","rid":${rid},"n":${rid + 1},"é":"✓"}\n${frame.toString()}`,
      ]),
    );
    expect(atB).toEqual(rids.map((rid) => ridHeaderLine('unheard', rid)));
  });

  it('requests of a busy turn go with their Redis replies: nobody hearing one is known at once, and nothing bounces', async () => {
    const [a, b] = [await node(), await node()];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const atA: string[] = [];
    const atB: string[] = [];
    let ended!: () => void;
    const end = new Promise<void>((r) => (ended = r));
    a.onNodeMessage((m) => atA.push(m));
    b.onNodeMessage((m) => {
      atB.push(m);
      if (m === 'end') ended();
    });
    const n = QUIET_REQUESTS_PER_TURN + 1;
    const heard = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        b.sendOrBounce(i === 1 ? 'nobody' : a.nodeId, `req ${i}`, undefined, `unheard ${i}`),
      ),
    );
    expect(heard).toEqual(Array.from({ length: n }, (_, i) => i !== 1));
    expect(await b.sendToNode(b.nodeId, 'end')).toBe(true); // after any bounce of theirs
    await end;
    expect(atB).toEqual(['end']);
    await waitFor(() => atA.length === n - 1, 2000, 'the heard requests');
    expect(atA).toEqual(Array.from({ length: n }, (_, i) => `req ${i}`).filter((_, i) => i !== 1));
  });

  it('requests of a quiet turn all go without their replies: the unheard one bounces', async () => {
    const { a, b, atA, atB } = await twoListening();
    const n = QUIET_REQUESTS_PER_TURN;
    const heard = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        b.sendOrBounce(i === 1 ? 'nobody' : a.nodeId, `req ${i}`, undefined, `unheard ${i}`),
      ),
    );
    expect(heard).toEqual(Array.from({ length: n }, () => true));
    await waitFor(() => atA.length === n - 1 && atB.length === 1, 2000, 'the heard requests and the bounce');
    expect(atA).toEqual(Array.from({ length: n }, (_, i) => `req ${i}`).filter((_, i) => i !== 1));
    expect(atB).toEqual(['unheard 1']);
  });

  it("a turn's requests leave from the outbox's own immediate: the quiet connection schedules none more, which would cost the loop an iteration", async () => {
    const [a, b] = [await node(), await node()];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const atA: string[] = [];
    a.onNodeMessage((m) => atA.push(m));
    const real = globalThis.setImmediate;
    const scheduled: string[] = [];
    globalThis.setImmediate = ((fn: (...args: unknown[]) => void, ...args: unknown[]) => {
      scheduled.push(fn.name);
      return real(fn, ...args);
    }) as typeof setImmediate;
    const turn = (n: number, tag: string) =>
      Promise.all(
        Array.from({ length: n }, (_, i) => b.sendOrBounce(a.nodeId, `${tag} ${i}`, undefined, `unheard ${i}`)),
      );
    const byTurn: string[][] = [];
    try {
      // A quiet turn (scripts, no replies), then a busy one (counted publishes between CLIENT REPLY ON and OFF).
      for (const [n, tag] of [
        [2, 'quiet'],
        [QUIET_REQUESTS_PER_TURN + 1, 'busy'],
      ] as const) {
        scheduled.length = 0;
        expect(await turn(n, tag)).toEqual(Array.from({ length: n }, () => true));
        byTurn.push(scheduled.filter((f) => f === 'sendTurnRequests' || f === 'uncork'));
      }
    } finally {
      globalThis.setImmediate = real;
    }
    expect(byTurn).toEqual([['sendTurnRequests'], ['sendTurnRequests']]);
    await waitFor(() => atA.length === 2 + QUIET_REQUESTS_PER_TURN + 1, 2000, 'every request');
  });

  it('a request sent without its reply whose connection closes before Redis confirmed it is in doubt (BusTimeoutError), not unsent', async () => {
    const [a, b] = [await node(), await node(`n-${uid()}`, { ...fast, quietConfirmMs: 60_000 })];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const got: string[] = [];
    a.onNodeMessage((m) => got.push(m));
    const admin = new Redis(REDIS_URL);
    try {
      const id = await quietClientId(admin, b);
      const outcome = b.sendOrBounce(a.nodeId, 'req', undefined, 'unheard').then(
        () => 'resolved',
        (err: unknown) => err,
      );
      await waitFor(() => got.length === 1, 2000, 'the request'); // heard, not yet confirmed
      await admin.client('KILL', 'ID', id);
      const err = await outcome;
      expect(err).toBeInstanceOf(BusTimeoutError);
      expect((err as Error).message).toMatch(/before Redis confirmed/);
    } finally {
      admin.disconnect();
    }
  });

  it('a server that refuses ECHO (which every confirmation needs) leaves the quiet connection unused', async () => {
    const a = await node(); // loads the bus's scripts, which the restricted user runs by their digest
    const admin = new Redis(REDIS_URL);
    const user = `pb-noecho-${uid()}`;
    try {
      const b = await nodeAs(admin, user, '-echo');
      // The quiet connection's probe was refused (Redis logs the denial), and it stays unused.
      const refused = async () =>
        ((await admin.acl('LOG')) as unknown[][]).some((e) => {
          const f = new Map<unknown, unknown>();
          for (let i = 0; i + 1 < e.length; i += 2) f.set(e[i], e[i + 1]);
          return f.get('username') === user && f.get('object') === 'echo';
        });
      await expect.poll(refused, { timeout: 2000 }).toBe(true);
      await sleep(100);
      expect(b.quietReady).toBe(false);
      const got: string[] = [];
      a.onNodeMessage((m) => got.push(m));
      // Node messages go on the command connection, with their replies.
      expect(await b.sendOrBounce('nobody', 'req', undefined, 'unheard')).toBe(false);
      expect(await b.sendOrBounce(a.nodeId, 'req', undefined, 'unheard')).toBe(true);
      await b.replyToNode(a.nodeId, 'answer');
      await waitFor(() => got.length === 2, 2000, 'the request and the answer');
      expect(got).toEqual(['req', 'answer']);
    } finally {
      await admin.acl('DELUSER', user);
      admin.disconnect();
    }
  });

  it('a server that refuses EVAL gets requests with their replies: nobody hearing one is known at once', async () => {
    const a = await node(); // loads the bus's scripts, which the restricted user runs by their digest
    const admin = new Redis(REDIS_URL);
    const user = `pb-noeval-${uid()}`;
    try {
      const b = await nodeAs(admin, user, '-eval');
      await waitFor(() => b.quietReady, 2000, 'the quiet connection (answers)');
      const got: string[] = [];
      a.onNodeMessage((m) => got.push(m));
      expect(await b.sendOrBounce('nobody', 'req', undefined, 'unheard')).toBe(false);
      expect(await b.sendOrBounce(a.nodeId, 'req', undefined, 'unheard')).toBe(true);
      await waitFor(() => got.length === 1, 2000, 'the request');
      expect(got).toEqual(['req']);
    } finally {
      await admin.acl('DELUSER', user);
      admin.disconnect();
    }
  });

  it('publishes whose receiver count is wanted go on the quiet connection between CLIENT REPLY ON and OFF, in order with the quiet ones', async () => {
    const [a, b] = [await node(), await node()];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const admin = new Redis(REDIS_URL);
    const monitor = await admin.duplicate().monitor();
    try {
      const [quietAddr, cmdAddr] = await Promise.all(
        ['quiet', 'cmd'].map(async (c) => {
          const line = String(await admin.client('LIST'))
            .split('\n')
            .find((l) => l.includes(`name=phonebridge:${b.nodeId}:${c} `));
          return /\baddr=(\S+)/.exec(line ?? '')?.[1];
        }),
      );
      expect(quietAddr).toBeDefined();
      const seen: Array<{ source: string; args: string[] }> = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => seen.push({ source, args }));
      await sleep(50); // MONITOR is on
      const atA: string[] = [];
      a.onNodeMessage((m) => atA.push(m));
      const n = QUIET_REQUESTS_PER_TURN + 1;
      // One turn: answers (quiet), notes (counted), then a busy turn's requests (counted).
      const outcomes = await Promise.all([
        b.replyToNode(a.nodeId, 'answer 0'),
        b.sendToNode(a.nodeId, 'note 1'),
        b.sendToNode('nobody', 'note 2'),
        b.replyToNode(a.nodeId, 'answer 3'),
        ...Array.from({ length: n }, (_, i) =>
          b.sendOrBounce(i === 1 ? 'nobody' : a.nodeId, `req ${i}`, undefined, `unheard ${i}`),
        ),
      ]);
      expect(outcomes).toEqual([undefined, true, false, undefined, ...Array.from({ length: n }, (_, i) => i !== 1)]);
      const heard = ['answer 0', 'note 1', 'answer 3', ...Array.from({ length: n }, (_, i) => `req ${i}`)].filter(
        (m) => m !== 'req 1',
      );
      await waitFor(() => atA.length === heard.length, 2000, 'every message heard');
      expect(atA).toEqual(heard);
      await waitFor(
        () => seen.some((c) => c.args.some((x) => x.endsWith(`req ${n - 1}`))),
        2000,
        'MONITOR to see them',
      );
      await sleep(50);
      const channel = (id: string) => `${prefix}ch:node:${id}`.toLowerCase();
      const pub = (to: string, m: string) => `publish ${channel(to)} m${m}`;
      // Exactly these commands, in this order: the answers' confirmation is the CLIENT REPLY ON
      // that the counted publishes need anyway, with the ECHO of its token.
      const onQuiet = seen.filter((c) => c.source === quietAddr).map((c) => c.args.join(' ').toLowerCase());
      expect(onQuiet.map((c) => c.replace(/^echo \d+$/, 'echo TOKEN'))).toEqual([
        pub(a.nodeId, 'answer 0'),
        'client reply on',
        'echo TOKEN',
        pub(a.nodeId, 'note 1'),
        pub('nobody', 'note 2'),
        'client reply off',
        pub(a.nodeId, 'answer 3'),
        'client reply on',
        'echo TOKEN',
        ...Array.from({ length: n }, (_, i) => pub(i === 1 ? 'nobody' : a.nodeId, `req ${i}`)),
        'client reply off',
      ]);
      // Each confirmation's own token.
      const tokens = onQuiet.filter((c) => c.startsWith('echo '));
      expect(new Set(tokens).size).toBe(tokens.length);
      // Nothing of it on the command connection.
      expect(seen.filter((c) => c.source === cmdAddr && c.args[0] === 'PUBLISH')).toEqual([]);
    } finally {
      monitor.disconnect();
      admin.disconnect();
    }
  });

  it('sendToNode and device frames cross nodes; unsubscribing stops delivery', async () => {
    const [a, b] = [await node(), await node()];
    const atA: string[] = [];
    const atB: string[] = [];
    a.onNodeMessage((m) => atA.push(m));
    b.onNodeMessage((m) => {
      atB.push(m);
      void b.sendToNode(a.nodeId, `re:${m}`);
    });
    expect(await a.sendToNode(b.nodeId, 'ping\n{"x":1}')).toBe(true);
    await waitFor(() => atA.length === 1, 1000, 'reply');
    expect(atB).toEqual(['ping\n{"x":1}']);
    expect(atA).toEqual(['re:ping\n{"x":1}']);

    const d = uid();
    const frames: string[] = [];
    const off = await b.subscribeDevice(d, (f) => frames.push(f));
    expect(await a.publishDevice(d, 'n1')).toBe(1);
    await waitFor(() => frames.length === 1, 1000, 'frame');
    off();
    const raw = new Redis(REDIS_URL);
    await waitFor(
      async () => ((await raw.pubsub('NUMSUB', `${prefix}ch:dev:${d}`)) as [string, number])[1] === 0,
      1000,
      'unsubscribe',
    );
    raw.disconnect();
    expect(await a.publishDevice(d, 'n2')).toBe(0);
  });

  it("messages are read off the subscriber's socket directly, also after it reconnects, with (un)subscribes between them", async () => {
    const [a, b] = [await node(), await node()];
    // ioredis's own message events: silent while push-reader.ts reads the messages.
    const sub = (b as unknown as { sub: Redis }).sub;
    let viaIoredis = 0;
    sub.on('messageBuffer', () => viaIoredis++);
    const atB: Buffer[] = [];
    b.onNodeBytes((m, s, e) => atB.push(Buffer.from(m.subarray(s, e))));
    const big = Buffer.alloc(300 * 1024, 'y');
    const roundOfMessages = async (tag: string) => {
      atB.length = 0;
      const d = uid();
      const frames: string[] = [];
      const sent = [`${tag}1`, `${tag}2\r\n`, big.toString(), `${tag}3`];
      // A subscribe's reply lands among the messages: ioredis still gets it (the await resolves).
      const pending = sent.map((m) => a.sendToNode(b.nodeId, m));
      const off = await b.subscribeDevice(d, (f) => frames.push(f));
      expect(await Promise.all(pending)).toEqual([true, true, true, true]);
      expect(await a.publishDevice(d, `${tag}-frame`)).toBe(1);
      await waitFor(() => atB.length === 4 && frames.length === 1, 2000, 'messages');
      expect(atB.map(String)).toEqual(sent);
      expect(frames).toEqual([`${tag}-frame`]);
      off();
      // Read into the reader's own buffer (push-reader.ts readIntoOwnBuffer), not through the
      // stream's `data` event, which would need a listener of its own.
      expect(sub.stream.listenerCount('data')).toBe(0);
    };
    await roundOfMessages('first');

    const admin = new Redis(REDIS_URL);
    const up = new Promise<void>((r) => b.onReconnected(r));
    await admin.client('KILL', 'ID', await clientId(admin, `phonebridge:${b.nodeId}:sub`));
    admin.disconnect();
    await up;
    await roundOfMessages('again');
    expect(viaIoredis).toBe(0);
  });

  it('a killed node (kill -9) is reported down and its devices become unowned within a few seconds', async () => {
    const a = await node();
    const down: Array<[string, number]> = [];
    a.onNodeDown((n) => down.push([n, Date.now()]));
    const victim = `victim-${uid()}`;
    const d = uid();
    const child = await nodeProcess(victim, d);
    await waitFor(async () => (await a.aliveNodes()).includes(victim), 2000, 'victim announced');
    await sleep(2 * fast.heartbeatMs); // A has seen the victim in a heartbeat
    expect(await a.ownerOf(d)).toMatchObject({ nodeId: victim });
    expect(a.othersAlive()).toBe(true);

    const killedAt = Date.now();
    child.kill('SIGKILL');
    await waitFor(() => down.some(([n]) => n === victim), 3000, 'node down');
    const after = down.find(([n]) => n === victim)![1] - killedAt;
    expect(after).toBeLessThan(fast.nodeTtlMs + 2 * fast.heartbeatMs + 600);
    expect(await a.ownerOf(d)).toBeUndefined();
    expect(await a.aliveNodes()).not.toContain(victim);
    expect(a.othersAlive()).toBe(false);
    // The phone reconnects here: a plain claim, nobody to notify.
    expect(await a.claimDevice(d)).toBe(2);
  });

  it('a node that closes is down for the others at once; one restarted under the same id too', async () => {
    const a = await node();
    // What node A sees, in order: the id reported down, and messages from the id's processes.
    const seen: string[] = [];
    const id = `n-${uid()}`;
    a.onNodeDown((n) => n === id && seen.push('down'));
    a.onNodeMessage((m) => seen.push(m));
    const d = uid();
    const first = await nodeProcess(id, d); // it claims d
    await heardBy([a], id); // A knows the first process
    // The first process dies and the id starts again at once (a pod restarting within the TTL):
    // the old process's claims are void, and A has said so before it hears anything from the
    // new one (docs/decisions/0245-a-restarted-node-waits-to-be-heard.md).
    first.kill('SIGKILL');
    const b2 = await node(id, patient);
    await b2.sendToNode(a.nodeId, 'from the new process');
    await waitFor(() => seen.includes('from the new process'), 2000, 'the new process heard');
    expect(seen).toEqual(['down', 'from the new process']);
    expect(await a.ownerOf(d)).toBeUndefined();
    await b2.claimDevice(d);
    await b2.close();
    expect(await a.ownerOf(d)).toBeUndefined(); // leaving releases everything at once
    expect(await a.aliveNodes()).not.toContain(id);
  });

  it('a node restarted right after leaving starts once every live peer has reported its predecessor down', async () => {
    const peers = [await node(), await node()];
    const downs = peers.map(() => [] as string[]);
    peers.forEach((p, i) => p.onNodeDown((n) => downs[i].push(n)));
    const id = `n-${uid()}`;
    for (let round = 0; round < 3; round++) {
      const before = await node(id);
      await heardBy(peers, id); // both peers know this process
      await before.close();
      const startedAt = Date.now();
      const after = await node(id, patient);
      const tookMs = Date.now() - startedAt;
      expect(downs.map((d) => d.filter((n) => n === id).length)).toEqual([1, 1]);
      // About one heartbeat period of the peers: not the bound of three of its own.
      expect(tookMs).toBeLessThan(3 * patient.heartbeatMs);
      await after.close();
      await sleep(2 * fast.heartbeatMs); // its leaving is seen too (a second nodeDown would not count)
      downs.forEach((d) => d.splice(0));
    }
  });

  it('a peer that stops renewing (paused) delays a start by at most the node TTL, and the new node stays alive', async () => {
    const a = await node();
    const paused = `paused-${uid()}`;
    const child = await nodeProcess(paused, uid());
    try {
      child.kill('SIGSTOP');
      const startedAt = Date.now();
      const b = await node();
      const tookMs = Date.now() - startedAt;
      // It waited for the paused peer until that peer's deadline passed (its last renewal came
      // at most one heartbeat before the pause), not longer; the margin is for a loaded machine.
      expect(tookMs).toBeGreaterThanOrEqual(fast.heartbeatMs);
      expect(tookMs).toBeLessThan(fast.nodeTtlMs + 1000);
      await sleep(2 * fast.heartbeatMs);
      expect(await a.aliveNodes()).toContain(b.nodeId);
      expect(await a.aliveNodes()).not.toContain(paused);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a lone node starts without waiting for peers', async () => {
    const lone = randomPrefix();
    const startedAt = Date.now();
    const b = await node(`n-${uid()}`, { ...fast, prefix: lone, heartbeatMs: 5000, nodeTtlMs: 15_000 });
    expect(Date.now() - startedAt).toBeLessThan(2000);
    expect(b.othersAlive()).toBe(false);
    await b.close();
    await dropPrefix(lone);
  });
});

describe('RedisBus during a Redis outage', () => {
  let redis: ScratchRedis | undefined;
  afterEach(async () => {
    await Promise.all(open.splice(0).map((b) => b.close()));
    await redis?.kill();
  });

  it('fails fast while Redis is gone and recovers by itself when it returns', async () => {
    redis = await ScratchRedis.start();
    const opts = { ...fast, commandTimeoutMs: 500 };
    const [a, b] = [await node('a', opts, redis.url), await node('b', opts, redis.url)];
    const events: string[] = [];
    for (const [name, bus] of [
      ['a', a],
      ['b', b],
    ] as const) {
      bus.onUnavailable(() => events.push(`${name}:down`));
      bus.onReconnected(() => events.push(`${name}:up`));
    }
    const d = uid();
    const frames: string[] = [];
    await a.subscribeDevice(d, (f) => frames.push(f));
    const atA: string[] = [];
    a.onNodeMessage((m) => atA.push(m));

    await redis.kill();
    await waitFor(() => !a.available && !b.available, 1000, 'outage noticed');
    for (const call of [
      () => a.hit('k', 1000),
      () => a.takeNonce('n'),
      () => b.claimDevice(d),
      () => b.sendToNode('a', 'x'),
      () => a.subscribeDevice(uid(), () => {}),
    ]) {
      const t0 = performance.now();
      await expect(call()).rejects.toBeInstanceOf(BusUnavailableError);
      expect(performance.now() - t0).toBeLessThan(1000);
    }
    await expect(a.hit('k', 1000)).rejects.toMatchObject({ code: 'relay_unavailable' });

    const restartedAt = Date.now();
    await redis.restart(); // same port, empty data: as after a Redis crash without persistence
    await waitFor(() => a.available && b.available, 5000, 'recovery');
    const recoveredIn = Date.now() - restartedAt;
    expect(recoveredIn).toBeLessThan(3000);
    expect(events.sort()).toEqual(['a:down', 'a:up', 'b:down', 'b:up']);

    // Channels were resubscribed and nodes re-announced.
    expect(await b.publishDevice(d, 'again')).toBe(1);
    expect(await b.sendToNode('a', 'hi')).toBe(true);
    await waitFor(() => frames.length === 1 && atA.length === 1, 1000, 'delivery after recovery');
    expect((await a.aliveNodes()).sort()).toEqual(['a', 'b']);
    expect(await a.hit('k', 1000)).toBe(1);
    // Ownership was lost with Redis's data: reclaim takes it anew.
    expect(await b.reclaimDevice(d, 1)).toBe(1);
  });

  it('a hung Redis (no replies) times out fast, is refused at once once declared down, then the bus recovers', async () => {
    redis = await ScratchRedis.start();
    const a = await node('a', { ...fast, commandTimeoutMs: 300 }, redis.url);
    const ups: number[] = [];
    a.onReconnected(() => ups.push(Date.now()));
    const admin = new Redis(redis.url);
    await admin.client('PAUSE', 3000, 'ALL');
    const t0 = performance.now();
    await expect(a.hit('k', 1000)).rejects.toBeInstanceOf(BusUnavailableError);
    expect(performance.now() - t0).toBeLessThan(1000);
    await waitFor(() => !a.available, 2000, 'hang noticed by the heartbeat');
    // Declared down: nothing is sent, so nothing waits out the command timeout while the
    // connection stays open (docs/decisions/0251-a-bus-declared-down-sends-nothing.md).
    for (const call of [() => a.hit('k', 1000), () => a.takeNonce('n'), () => a.subscribeDevice(uid(), () => {})]) {
      const t1 = performance.now();
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(BusUnavailableError);
      expect(err).not.toBeInstanceOf(BusTimeoutError);
      expect(performance.now() - t1).toBeLessThan(100);
    }
    await waitFor(() => a.available, 7000, 'recovery after the pause');
    expect(ups).toHaveLength(1);
    expect(await a.hit('k2', 1000)).toBe(1);
    admin.disconnect();
  });

  it('a Redis that answers late, within the node TTL, does not take the bus down; a publish answered late still arrives', async () => {
    redis = await ScratchRedis.start();
    const opts = { prefix, nodeTtlMs: 3000, heartbeatMs: 150, commandTimeoutMs: 300 };
    const [a, b] = [await node('a', opts, redis.url), await node('b', opts, redis.url)];
    const downs: string[] = [];
    a.onUnavailable(() => downs.push('a'));
    b.onUnavailable(() => downs.push('b'));
    const atA: string[] = [];
    a.onNodeMessage((m) => atA.push(m));
    await waitFor(() => b.quietReady, 2000, 'the quiet connection'); // where sendToNode publishes
    const admin = new Redis(redis.url);
    try {
      await admin.client('PAUSE', 800, 'ALL'); // several heartbeats time out meanwhile
      // In doubt, not lost: Redis runs it when the pause ends.
      await expect(b.sendToNode('a', 'late')).rejects.toBeInstanceOf(BusTimeoutError);
      await waitFor(() => atA.includes('late'), 3000, 'the late publish delivered');
      await sleep(300); // a heartbeat or two after the pause
      expect(downs).toEqual([]);
      expect(a.available && b.available).toBe(true);
      // The late publish's reply (1) was its own, not taken for the next one's.
      expect(await b.sendToNode('nobody', 'unheard')).toBe(false);
      expect(await b.sendToNode('a', 'after')).toBe(true);
    } finally {
      admin.disconnect();
    }
  });

  it('a counted publish whose connection closes before Redis answered is in doubt (BusTimeoutError) at once, and the next goes', async () => {
    redis = await ScratchRedis.start();
    const [a, b] = [
      await node('a', fast, redis.url),
      await node('b', { ...fast, commandTimeoutMs: 10_000 }, redis.url),
    ];
    await waitFor(() => b.quietReady, 2000, 'the quiet connection');
    const admin = new Redis(redis.url);
    try {
      const id = await quietClientId(admin, b);
      await admin.client('PAUSE', 3000, 'WRITE'); // holds PUBLISH, not CLIENT KILL
      const t0 = performance.now();
      const outcome = b.sendToNode('a', 'held').then(
        () => 'resolved',
        (err: unknown) => err,
      );
      await sleep(100);
      await admin.client('KILL', 'ID', id);
      const err = await outcome;
      expect(err).toBeInstanceOf(BusTimeoutError);
      expect((err as Error).message).toMatch(/closed before Redis answered/);
      expect(performance.now() - t0).toBeLessThan(2000); // not the 10 s command timeout
      await admin.client('UNPAUSE');
      await waitFor(() => b.quietReady, 5000, 'the quiet connection back');
      const got: string[] = [];
      a.onNodeMessage((m) => got.push(m));
      expect(await b.sendToNode('nobody', 'x')).toBe(false);
      expect(await b.sendToNode('a', 'next')).toBe(true);
      await waitFor(() => got.includes('next'), 2000, 'the next message');
    } finally {
      admin.disconnect();
    }
  });

  it('peers that lapsed while Redis was frozen are judged once this node can watch: one that renews is never reported down nor reaped, one that stays silent is', async () => {
    // A failover or a hung Redis holds every node's heartbeat alike. Here the heartbeat of the
    // watching node is held (not failed: the command timeout is longer than the freeze), and
    // its peers' processes are stopped with Redis, so that it is the first to renew afterwards
    // and finds both peers lapsed (docs/decisions/0210-no-phone-offline-because-redis-was-down.md).
    redis = await ScratchRedis.start();
    const timings = { nodeTtlMs: 1200, heartbeatMs: 200 };
    const a = await node('watcher', { prefix, ...timings, commandTimeoutMs: 10_000 }, redis.url);
    const down: string[] = [];
    a.onNodeDown((n) => down.push(n));
    const [sleeperId, deadId, sleeperDevice, deadDevice] = [`s-${uid()}`, `d-${uid()}`, uid(), uid()];
    const sleeper = await nodeProcess(sleeperId, sleeperDevice, redis.url, timings);
    const dead = await nodeProcess(deadId, deadDevice, redis.url, timings);
    const admin = new Redis(redis.url);
    try {
      await heardBy([a], sleeperId, redis.url);
      await heardBy([a], deadId, redis.url);
      sleeper.kill('SIGSTOP');
      dead.kill('SIGSTOP');
      redis.signal('SIGSTOP');
      await sleep(timings.nodeTtlMs + 3 * timings.heartbeatMs);
      redis.signal('SIGCONT');
      const [sec] = (await admin.time()).map(Number);
      const lastBeat = async () => Number(await admin.hget(`${prefix}beats`, a.nodeId));
      await waitFor(
        async () => (await lastBeat()) >= sec * 1000,
        5000,
        "the watcher's first heartbeat after the freeze",
      );
      const alive = await a.aliveNodes();
      expect(alive).not.toContain(sleeperId); // both lapsed in Redis when the watcher renewed
      expect(alive).not.toContain(deadId);
      await sleep(50); // its heartbeat's reply handled
      expect(down).toEqual([]);

      sleeper.kill('SIGCONT'); // it renews within the watcher's blind node TTL
      await waitFor(() => down.includes(deadId), 3 * timings.nodeTtlMs, 'the silent peer reported down');
      expect(down).toEqual([deadId]);
      expect(await a.ownerOf(sleeperDevice)).toEqual({ nodeId: sleeperId, epoch: 1 });
      expect(await a.ownerOf(deadDevice)).toBeUndefined();
      expect(await admin.hget(`${prefix}dev:${sleeperDevice}`, 'node')).toBe(sleeperId); // not reaped
    } finally {
      redis.signal('SIGCONT');
      sleeper.kill('SIGKILL');
      dead.kill('SIGKILL');
      admin.disconnect();
    }
  });

  it('connect fails fast with BusUnavailableError when Redis is not there', async () => {
    redis = await ScratchRedis.start();
    await redis.kill();
    const t0 = performance.now();
    await expect(RedisBus.connect(redis.url, 'x', quietLog, fast)).rejects.toBeInstanceOf(BusUnavailableError);
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});
