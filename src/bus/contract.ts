// One contract, every driver: what the gateway may rely on whichever bus it runs on.
// bus.test.ts runs it on the local bus and one Redis; redis/topologies.test.ts on Sentinel and Redis Cluster.
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';
import { describe, expect, it, afterEach } from 'vitest';
import { sleep } from './redis/test-support.ts';
import type { Bus, SessionRecord } from './types.ts';

export const replay = { maxEvents: 5, maxBytes: 10_000, ttlMs: 60_000 };

function session(id: string, deviceId: string, tokenId: string): SessionRecord {
  return {
    id,
    deviceId,
    tokenId,
    accountId: 'acc',
    revision: '2025-06-18',
    scopes: ['devices:read'],
    createdAt: 1,
    lastSeenAt: 1,
  };
}

/**
 * Until `done()` holds (what was published has arrived), polled: pub/sub delivery takes a
 * round trip, longer on a loaded machine or a Redis Cluster, so a fixed sleep would race it.
 */
async function arrived(done: () => boolean, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!done() && Date.now() < until) await sleep(5);
}

/** A bus driver under test: `replay` overrides the replay limits of `replay` below. */
export type MakeBus = (replayLimits?: typeof replay) => Promise<Bus>;

/** The contract, for each driver: a describe block per driver. */
export function busContract(drivers: Array<[string, MakeBus]>): void {
  describe.each(drivers)('%s bus', (_name, make) => {
    let bus: Bus;
    const open = async () => (bus = await make());
    afterEach(() => bus?.close());
    const uid = () => Math.random().toString(36).slice(2);

    it('nonces are single use and expire', async () => {
      await open();
      const [a, b] = [uid(), uid()];
      await bus.putNonce(a, 'dev-1', 10_000);
      expect(await bus.takeNonce(a)).toBe('dev-1');
      expect(await bus.takeNonce(a)).toBeUndefined();
      await bus.putNonce(b, 'dev-1', 50);
      await sleep(80);
      expect(await bus.takeNonce(b)).toBeUndefined();
    });

    it('a nonce taken concurrently has exactly one winner', async () => {
      await open();
      const a = uid();
      await bus.putNonce(a, 'dev-1', 10_000);
      const got = await Promise.all(Array.from({ length: 50 }, () => bus.takeNonce(a)));
      expect(got.filter((x) => x === 'dev-1')).toHaveLength(1);
    });

    it('fixed-window counters count atomically and reset when the window ends', async () => {
      await open();
      const k = uid();
      expect(await bus.peek(k)).toBe(0);
      // Windows of 1 s: what must still be inside one has half a second to spare for a machine
      // that stalls; what must be past one is certain (sleeps only ever run long).
      const hits = await Promise.all(Array.from({ length: 30 }, () => bus.hit(k, 1000)));
      expect([...hits].sort((x, y) => x - y)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      expect(await bus.peek(k)).toBe(30);
      await sleep(500);
      expect(await bus.hit(k, 1000)).toBe(31); // later hits do not move the window's end
      await sleep(550);
      expect(await bus.peek(k)).toBe(0);
      expect(await bus.hit(k, 1000)).toBe(1);
    });

    it('mark sets a flag peek reads as 1, and a later mark renews it', async () => {
      await open();
      const k = uid();
      await bus.mark(k, 1000);
      expect(await bus.peek(k)).toBe(1);
      await sleep(500);
      await bus.mark(k, 1000); // renewed: lives 1 s from now, past the first mark's end
      await sleep(550);
      expect(await bus.peek(k)).toBe(1);
      await sleep(500);
      expect(await bus.peek(k)).toBe(0);
    });

    it('unhit takes one hit back, never below zero, and keeps the window', async () => {
      await open();
      const k = uid();
      await bus.unhit(k);
      expect(await bus.peek(k)).toBe(0);
      await bus.hit(k, 1000);
      await bus.hit(k, 1000);
      await bus.unhit(k);
      expect(await bus.peek(k)).toBe(1);
      await bus.unhit(k);
      await bus.unhit(k);
      expect(await bus.peek(k)).toBe(0);
      expect(await bus.hit(k, 1000)).toBe(1);
      await sleep(1050);
      expect(await bus.peek(k)).toBe(0); // the window opened by the first hit still ends on time
    });

    it('sessions: create, touch renews idle time, expiry, delete', async () => {
      await open();
      const id = uid();
      // Idle time 1 s, touched half-way, then checked past the first deadline: each "alive"
      // has half a second to spare for a machine that stalls (sleeps only ever run long),
      // and each "expired" is certain.
      const IDLE = 1000;
      const created = performance.now();
      await bus.sessions.create(session(id, 'd', 't'), IDLE);
      await sleep(IDLE / 2);
      const s = await bus.sessions.touch(id, IDLE);
      const touched = performance.now();
      expect(s, `touched ${Math.round(touched - created)} ms after create`).toMatchObject({
        id,
        deviceId: 'd',
        tokenId: 't',
        scopes: ['devices:read'],
      });
      expect(s!.lastSeenAt).toBeGreaterThan(1);
      await sleep(IDLE / 2 + 20);
      // Past the create's deadline: alive thanks to the touch.
      expect(
        await bus.sessions.touch(id, IDLE),
        `${Math.round(performance.now() - touched)} ms after the touch`,
      ).toBeDefined();
      await sleep(IDLE + 50);
      expect(await bus.sessions.touch(id, IDLE)).toBeUndefined();

      const id2 = uid();
      await bus.sessions.create(session(id2, 'd', 't'), 10_000);
      expect(await bus.sessions.delete(id2)).toBe(true);
      expect(await bus.sessions.delete(id2)).toBe(false);
      expect(await bus.sessions.touch(id2, 10_000)).toBeUndefined();
    });

    it('sessions: deleteWhere by device or token', async () => {
      await open();
      const [d1, d2, t1, t2] = [uid(), uid(), uid(), uid()];
      const ids = [uid(), uid(), uid(), uid()];
      await bus.sessions.create(session(ids[0], d1, t1), 10_000);
      await bus.sessions.create(session(ids[1], d1, t2), 10_000);
      await bus.sessions.create(session(ids[2], d2, t2), 10_000);
      await bus.sessions.create(session(ids[3], d2, t1), 10_000);
      expect(await bus.sessions.deleteWhere({ deviceId: d1 })).toBe(2);
      expect(await bus.sessions.touch(ids[0], 10_000)).toBeUndefined();
      expect(await bus.sessions.deleteWhere({ tokenId: t2 })).toBe(1); // ids[1] is already gone
      expect(await bus.sessions.touch(ids[2], 10_000)).toBeUndefined();
      expect(await bus.sessions.touch(ids[3], 10_000)).toBeDefined();
      expect(await bus.sessions.deleteWhere({ deviceId: uid(), tokenId: t1 })).toBe(1);
      expect(await bus.sessions.deleteWhere({})).toBe(0);
    });

    it('sessions: countForDevice counts the live sessions bound to a device', async () => {
      await open();
      const [d1, d2] = [uid(), uid()];
      const ids = [uid(), uid(), uid()];
      await bus.sessions.create(session(ids[0], d1, uid()), 10_000);
      await bus.sessions.create(session(ids[1], d1, uid()), 1000); // room for a stalled machine
      await bus.sessions.create(session(ids[2], d2, uid()), 10_000);
      expect(await bus.sessions.countForDevice(d1)).toBe(2);
      expect(await bus.sessions.countForDevice(d2)).toBe(1);
      expect(await bus.sessions.countForDevice(uid())).toBe(0);
      await sleep(1050); // ids[1] expires
      expect(await bus.sessions.countForDevice(d1)).toBe(1);
      await bus.sessions.delete(ids[0]);
      expect(await bus.sessions.countForDevice(d1)).toBe(0);
      // Sessions evicted by the per-token cap or deleted by credential stop counting too.
      const token = uid();
      const more = [uid(), uid(), uid()];
      for (const id of more) await bus.sessions.create(session(id, d1, token), 10_000, 2);
      expect(await bus.sessions.countForDevice(d1)).toBe(2);
      expect(await bus.sessions.deleteWhere({ tokenId: token })).toBe(2);
      expect(await bus.sessions.countForDevice(d1)).toBe(0);
      expect(await bus.sessions.countForDevice(d2)).toBe(1);
      // The new session is kept even when it expires first (a shorter idle time, or a tie).
      const lone = uid();
      const [first, second] = [uid(), uid()];
      await bus.sessions.create(session(first, d2, lone), 10_000, 1);
      expect(await bus.sessions.create(session(second, d2, lone), 5_000, 1)).toEqual([first]);
      expect(await bus.sessions.touch(second, 5_000)).toBeDefined();
      expect(await bus.sessions.countForDevice(d2)).toBe(2);
    });

    it('sessions: listForDevice gives live sessions, most recently used first, with their client and last use', async () => {
      await open();
      const [d, other] = [uid(), uid()];
      const [old, busy, gone, legacy] = [uid(), uid(), uid(), uid()];
      const now = Date.now();
      const at = (id: string, client?: SessionRecord['client']) => ({
        ...session(id, d, uid()),
        createdAt: now,
        lastSeenAt: now,
        ...(client ? { client } : {}),
      });
      await bus.sessions.create({ ...at(old, { name: 'idle-agent', version: '0.1' }), credential: 'grant-1' }, 10_000);
      await bus.sessions.create(at(busy, { name: 'busy-agent' }), 10_000);
      await bus.sessions.create(at(gone, { name: 'short' }), 100);
      // A record written before sessions carried a client (or a credential) still reads.
      await bus.sessions.create(at(legacy), 10_000);
      await bus.sessions.create(session(uid(), other, uid()), 10_000);
      await sleep(250); // `gone` expires
      expect(await bus.sessions.touch(busy, 10_000)).toMatchObject({ client: { name: 'busy-agent' } });
      const listed = await bus.sessions.listForDevice(d, 10);
      expect(listed.map((s) => s.id)[0]).toBe(busy);
      expect(new Set(listed.map((s) => s.id))).toEqual(new Set([busy, old, legacy]));
      const byId = new Map(listed.map((s) => [s.id, s]));
      expect(byId.get(old)!.client).toEqual({ name: 'idle-agent', version: '0.1' });
      expect(byId.get(legacy)!.client).toBeUndefined();
      expect(byId.get(old)!.credential).toBe('grant-1');
      expect(byId.get(legacy)!.credential).toBeUndefined();
      expect(byId.get(old)!.lastSeenAt).toBe(now);
      expect(byId.get(busy)!.lastSeenAt).toBeGreaterThanOrEqual(now + 200);
      expect(await bus.sessions.listForDevice(d, 1)).toHaveLength(1);
      expect(await bus.sessions.listForDevice(uid(), 10)).toEqual([]);
    });

    it('control events reach this node', async () => {
      await open();
      const got: unknown[] = [];
      bus.onControl((e) => got.push(e));
      await bus.publishControl({ type: 'token_revoked', tokenId: 'tok' });
      await arrived(() => got.length >= 1);
      expect(got).toEqual([{ type: 'token_revoked', tokenId: 'tok' }]);
    });

    it('GET stream handover events reach this node as published (docs/decisions/0246-get-stream-handover.md)', async () => {
      await open();
      const got: unknown[] = [];
      bus.onControl((e) => got.push(e));
      const sent = [
        { type: 'stream_live', sessionId: 's', streamId: 'g', nodeId: bus.nodeId, ref: 'r1' },
        { type: 'stream_released', sessionId: 's', nodeId: bus.nodeId, ref: 'r1' },
        { type: 'stream_lapsed', sessionId: 's', nodeId: bus.nodeId },
      ] as const;
      for (const e of sent) await bus.publishControl(e);
      await arrived(() => got.length >= sent.length);
      expect(got).toEqual(sent);
    });

    it('claims: epochs grow, release is compare-and-delete, reclaim keeps or refuses', async () => {
      await open();
      const d = uid();
      expect(await bus.ownerOf(d)).toBeUndefined();
      const e1 = await bus.claimDevice(d);
      expect(await bus.ownerOf(d)).toEqual({ nodeId: bus.nodeId, epoch: e1 });
      const e2 = await bus.claimDevice(d); // the phone reconnected to this same node
      expect(e2).toBeGreaterThan(e1);
      expect(await bus.reclaimDevice(d, e1)).toBeUndefined(); // the older socket is stale
      expect(await bus.reclaimDevice(d, e2)).toBe(e2);
      expect(await bus.releaseDevice(d, e1)).toBe(false);
      expect(await bus.ownerOf(d)).toEqual({ nodeId: bus.nodeId, epoch: e2 });
      expect(await bus.releaseDevice(d, e2)).toBe(true);
      expect(await bus.ownerOf(d)).toBeUndefined();
      const e3 = await bus.reclaimDevice(d, e2); // unowned: claimed anew
      expect(e3).toBeGreaterThan(e2);
      expect(await bus.aliveNodes()).toContain(bus.nodeId);
    });

    it('node messages to this node arrive; to an unknown node report false', async () => {
      await open();
      const got: string[] = [];
      bus.onNodeMessage((m) => got.push(m));
      expect(await bus.sendToNode(bus.nodeId, 'hello')).toBe(true);
      expect(await bus.sendToNode('nobody', 'hello')).toBe(false);
      await arrived(() => got.length >= 1);
      expect(got).toEqual(['hello']);
    });

    it('a reply to a node (no count of who heard it) arrives as a node message, after what was sent before it', async () => {
      await open();
      const got: string[] = [];
      bus.onNodeMessage((m) => got.push(m));
      const frame = Buffer.from('{"result":{"text":"héllo ✓"},"id":4}');
      expect(await bus.sendToNode(bus.nodeId, 'before')).toBe(true);
      await bus.replyToNode(bus.nodeId, '{"t":"res","rid":4}\n', frame);
      await bus.replyToNode('nobody', 'lost'); // nobody acts on who heard it: no error
      await arrived(() => got.length >= 2);
      expect(got).toEqual(['before', `{"t":"res","rid":4}\n${frame.toString()}`]);
    });

    it('a request nobody hears says so (false at once, or its bounce comes back); one heard bounces nothing', async () => {
      await open();
      const got: string[] = [];
      let ended!: () => void;
      const end = new Promise<void>((r) => (ended = r));
      bus.onNodeMessage((m) => {
        got.push(m);
        if (m === 'end') ended();
      });
      const frame = Buffer.from('{"name":"echo"}');
      expect(await bus.sendOrBounce(bus.nodeId, '{"t":"req","rid":1}\n', frame, 'bounce 1')).toBe(true);
      const heard = await bus.sendOrBounce('nobody', '{"t":"req","rid":2}\n', frame, 'bounce 2');
      // Sent after both on a connection that reads its reply: it arrives after any bounce of theirs.
      expect(await bus.sendToNode(bus.nodeId, 'end')).toBe(true);
      await end;
      expect(got).toEqual([`{"t":"req","rid":1}\n${frame.toString()}`, ...(heard ? ['bounce 2'] : []), 'end']);
    });

    it('a node message with a byte payload arrives whole, as bytes and as a string', async () => {
      await open();
      const strings: string[] = [];
      const bytes: Buffer[] = [];
      bus.onNodeMessage((m) => strings.push(m));
      bus.onNodeBytes((m, s, e) => bytes.push(Buffer.from(m.subarray(s, e))));
      const frame = Buffer.from('{"result":{"text":"héllo ✓"},"id":3}');
      expect(await bus.sendToNode(bus.nodeId, '{"t":"res","rid":3}\n', frame)).toBe(true);
      expect(await bus.sendToNode(bus.nodeId, 'plain')).toBe(true);
      await arrived(() => strings.length >= 2 && bytes.length >= 2);
      expect(strings).toEqual([`{"t":"res","rid":3}\n${frame.toString()}`, 'plain']);
      expect(bytes.map((b) => b.toString())).toEqual(strings);
      expect(Buffer.compare(bytes[0].subarray(bytes[0].indexOf(0x0a) + 1), frame)).toBe(0);
    });

    it('device channels are refcounted per node', async () => {
      await open();
      const d = uid();
      const a: string[] = [];
      const b: string[] = [];
      const offA = await bus.subscribeDevice(d, (f) => a.push(f));
      const offB = await bus.subscribeDevice(d, (f) => b.push(f));
      expect(await bus.publishDevice(d, 'one')).toBe(1); // one node, however many listeners
      await arrived(() => a.length >= 1 && b.length >= 1);
      offA();
      offA(); // idempotent: must not drop B's interest
      expect(await bus.publishDevice(d, 'two')).toBe(1);
      await arrived(() => b.length >= 2);
      offB();
      await sleep(50);
      expect(await bus.publishDevice(d, 'three')).toBe(0);
      expect(a).toEqual(['one']);
      expect(b).toEqual(['one', 'two']);
    });

    it('replay buffer: ids per session encode the stream, bounded by count and bytes', async () => {
      await open();
      const sid = uid();
      await bus.sessions.create(session(sid, 'd', 't'), 10_000);
      const ids: string[] = [];
      for (let i = 1; i <= 8; i++) ids.push((await bus.appendEvent(sid, i % 2 ? 'get' : 'post-7', `e${i}`))!);
      expect(new Set(ids).size).toBe(8);
      expect(ids[0]).toBe('get:1');
      expect(ids[1]).toBe('post-7:2');
      // Only the last 5 (e4..e8) are kept; of stream "get" after e1: e5, e7.
      expect(await bus.replayAfter(sid, 'get:1')).toEqual([
        { id: 'get:5', data: 'e5' },
        { id: 'get:7', data: 'e7' },
      ]);
      expect(await bus.replayAfter(sid, 'post-7:6')).toEqual([{ id: 'post-7:8', data: 'e8' }]);
      expect(await bus.replayAfter(sid, 'garbage')).toEqual([]);
      expect(await bus.replayAfter(uid(), 'get:1')).toEqual([]);

      // Bytes: three 4 KB events exceed 10 KB, so the oldest goes.
      const big = 'x'.repeat(4000);
      for (let i = 0; i < 3; i++) await bus.appendEvent(sid, 'big', big);
      expect((await bus.replayAfter(sid, 'big:1')).map((e) => e.id)).toEqual(['big:10', 'big:11']);
      // One event larger than the bound is still kept (alone).
      await bus.appendEvent(sid, 'big', 'y'.repeat(20_000));
      expect((await bus.replayAfter(sid, 'big:1')).map((e) => e.id)).toEqual(['big:12']);

      await bus.sessions.delete(sid);
      expect(await bus.replayAfter(sid, 'big:1')).toEqual([]);
    });

    it('an event of a session that ended gets no id and is not kept; a live one’s ids go on', async () => {
      await open();
      const sid = uid();
      await bus.sessions.create(session(sid, 'd', 't'), 10_000);
      expect(await bus.appendEvent(sid, 's', 'a')).toBe('s:1');
      expect(await bus.appendEvent(sid, 's', 'b')).toBe('s:2');
      await bus.sessions.delete(sid);
      // A count begun anew would say s:1 again, for another event.
      expect(await bus.appendEvent(sid, 's', 'late')).toBeUndefined();
      expect(await bus.appendEvent(uid(), 's', 'never')).toBeUndefined();
      expect(await bus.replayAfter(sid, 's:0')).toEqual([]);
    });

    it('replay ids keep growing after the buffer expires while the session lives', async () => {
      bus = await make({ ...replay, ttlMs: 100 });
      const sid = uid();
      await bus.sessions.create(session(sid, 'd', 't'), 10_000);
      expect(await bus.appendEvent(sid, 's', 'a')).toBe('s:1');
      await sleep(200);
      expect(await bus.replayAfter(sid, 's:0')).toEqual([]); // expired (idle buffer)
      expect(await bus.appendEvent(sid, 's', 'b')).toBe('s:2');
    });
  });
}
