// The rolling-upgrade rule, checked fast: this release reads every bus message and Redis record
// as the previous format wrote them (docs/decisions/0200-bus-and-record-format-versions.md).
// The fixtures under test/fixtures/formats/<set>/ are frozen bytes written by an older
// release's own code (scripts/capture-format-fixtures.ts); each set is fed to today's decoders
// and to a real RedisBus on a real Redis, and the decoded values are asserted.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  decodeBoot,
  decodeControl,
  decodeDeviceFrame,
  decodeNodeMessage,
  decodeSession,
  decodeSupersede,
  encodeControl,
  encodeDeviceFrame,
  encodeNodeMessage,
  encodeSession,
  FORMATS,
  nodeHeaderLine,
  ridHeaderLine,
  UnreadableFormatError,
} from '../../src/bus/formats.ts';
import { RedisBus } from '../../src/bus/redis/index.ts';
import { dropPrefix, quietLog, randomPrefix, REDIS_URL, sleep, waitFor } from '../../src/bus/redis/test-support.ts';
import type { ControlEvent } from '../../src/bus/index.ts';
import { unreadable } from '../../src/metrics.ts';

const ROOT = fileURLToPath(new URL('../fixtures/formats/', import.meta.url));

interface Manifest {
  rev: string;
  nodes: { a: string; b: string };
  deviceId: string;
  tokenId: string;
  sessionId: string;
  epoch: { before: number; after: number };
  replay: { streamId: string; ids: string[] };
  controls: ControlEvent[];
  messages: Array<{ file: string; channel: string; kind: string }>;
}
interface Records {
  capturedAt: number;
  records: Array<{ key: string; type: string; ttl: number; value: any }>;
}

const SETS = readdirSync(ROOT).sort();

/** Every message kind and record a set must hold: a new kind on the bus needs a fixture here. */
const MESSAGE_KINDS = [
  'node-req-bytes',
  'node-req-parsed',
  'node-res',
  'node-rel',
  'node-fail',
  'node-note',
  'node-cancel',
  'node-ccancel',
  'node-orphan',
  'node-redo',
  'node-bye',
  'supersede',
  'device-frame',
  'control-device_removed',
  'control-token_revoked',
  'control-credential_revoked',
  'control-account_locked',
  'control-sessions_ended',
];
const RECORD_KINDS = ['boots', 'dev:', 'ev:', 'evm:', 'nodes', 'nonce:', 'owned:', 'rl:', 'sess:', 'sx:d:', 'sx:t:'];

it('the metric of unreadable formats has a series for every format', () => {
  expect(Object.keys(unreadable).sort()).toEqual(Object.keys(FORMATS).sort());
});

it('a version older than a format reads is refused, a missing one is version 1', () => {
  expect(() => decodeControl('{"type":"x","v":0}')).toThrow(UnreadableFormatError);
  expect(() => decodeControl('{"type":"x","v":"1"}')).toThrow(UnreadableFormatError);
  expect(decodeControl('{"type":"x"}')).toEqual({ type: 'x' });
  expect(decodeControl('{"type":"x","v":1}')).toEqual({ type: 'x' });
  expect(() => decodeNodeMessage(Buffer.from('{"t":"bye","v":-1}\n'))).toThrow(UnreadableFormatError);
  expect(() => decodeDeviceFrame('v\n{}')).toThrow(UnreadableFormatError);
  expect(decodeBoot('abc')).toEqual({ boot: 'abc', v: 1 });
  expect(decodeBoot('abc.v1')).toEqual({ boot: 'abc', v: 1 });
});

it("answers' and bounces' headers are written and read without JSON, byte for byte as JSON would be", () => {
  for (const t of ['res', 'rel', 'unheard'] as const)
    for (const rid of [0, 7, 1234567, Number.MAX_SAFE_INTEGER]) {
      const line = ridHeaderLine(t, rid);
      expect(line).toBe(nodeHeaderLine({ t, rid }));
      const m = decodeNodeMessage(Buffer.from(`${line}{"id":1}`));
      expect(m.header).toEqual(JSON.parse(line));
      expect(m.payload.toString()).toBe('{"id":1}');
    }
  // Near misses are read by JSON.parse, as every header was: the same result or the same refusal.
  const v = FORMATS.nodeMessage.write;
  for (const head of [
    `{"v":${v},"t":"res","rid":7,"x":1}`,
    `{"v":${v},"t":"res","rid":-7}`,
    `{"v":${v},"t":"res","rid":07}`,
    `{"v":${v},"t":"res","rid":7.5}`,
    `{"v":${v},"t":"res","rid":1e3}`,
    `{"v":${v},"t":"resx","rid":7}`,
    `{"v":${v},"t":"res","rid":}`,
    `{"v":${v},"t":"fail","rid":7,"error":{"code":1,"message":"m"}}`,
    `{"t":"res","rid":7}`,
  ]) {
    let want: unknown;
    try {
      want = JSON.parse(head);
    } catch {
      want = 'refused';
    }
    let got: unknown;
    try {
      got = decodeNodeMessage(Buffer.from(`${head}\n`)).header;
    } catch (err) {
      expect(err).toBeInstanceOf(UnreadableFormatError);
      got = 'refused';
    }
    expect(got, head).toEqual(want);
  }
  // The answer's header is read up to its first `}`, which must end the line.
  const line = ridHeaderLine('res', 7);
  expect(() => decodeNodeMessage(Buffer.from(line.slice(0, -1)))).not.toThrow(); // no line end: JSON.parse
  expect(decodeNodeMessage(Buffer.from(line.slice(0, -1))).header).toEqual(JSON.parse(line));
  expect(() => decodeNodeMessage(Buffer.from(`${line.slice(0, -1)} \n`))).not.toThrow();
  expect(decodeNodeMessage(Buffer.from(`${line.slice(0, -1)} \n{"p":1}`)).payload.toString()).toBe('{"p":1}');
  expect(() => decodeNodeMessage(Buffer.from(`${line.slice(0, -1)}x\n`))).toThrow(UnreadableFormatError);
  const long = `{"v":${v},"t":"res","rid":${'1'.repeat(40)}}`;
  expect(decodeNodeMessage(Buffer.from(`${long}\n`)).header).toEqual(JSON.parse(long));
});

it('what this release writes is the previous format with a version added, and reads back', () => {
  // The previous release parses the same JSON and ignores the field it does not know.
  const msg = encodeNodeMessage({ t: 'res', rid: 7 }, '{"result":{}}');
  expect(msg).toBe(`{"v":${FORMATS.nodeMessage.write},"t":"res","rid":7}\n{"result":{}}`);
  expect(decodeNodeMessage(Buffer.from(msg)).header).toEqual({ v: FORMATS.nodeMessage.write, t: 'res', rid: 7 });
  const event = { type: 'token_revoked', tokenId: 'k' };
  expect(JSON.parse(encodeControl(event))).toEqual({ v: FORMATS.control.write, ...event });
  expect(decodeControl(encodeControl(event))).toEqual(event);
  const rec = { id: 's', tokenId: 'k', deviceId: 'd', scopes: [], createdAt: 1, lastSeenAt: 2 };
  expect(JSON.parse(encodeSession(rec))).toEqual({ v: FORMATS.session.write, ...rec });
  expect(decodeSession(encodeSession(rec))).toEqual(rec);
  expect(encodeDeviceFrame('{"jsonrpc":"2.0"}')).toBe('{"jsonrpc":"2.0"}'); // version 1: the frame as is
});

describe.each(SETS)('fixtures %s', (set) => {
  const dir = join(ROOT, set);
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as Manifest;
  const { records, capturedAt } = JSON.parse(readFileSync(join(dir, 'records.json'), 'utf8')) as Records;
  const bytes = (kind: string) => readFileSync(join(dir, `messages/${kind}.bin`));
  const node = (kind: string) => {
    const raw = bytes(kind);
    expect(raw[0]).toBe(0x6d); // `m`: a node message on a node channel
    return decodeNodeMessage<{ t: string } & Record<string, any>>(raw.subarray(1));
  };
  const { a, b } = manifest.nodes;

  it('holds every message kind and record', () => {
    expect(manifest.messages.map((m) => m.kind).sort()).toEqual([...MESSAGE_KINDS].sort());
    for (const k of RECORD_KINDS)
      expect(
        records.some((r) => r.key.startsWith(k)),
        k,
      ).toBe(true);
  });

  it('node messages decode to their headers and payloads', () => {
    const caller = {
      credential: manifest.tokenId,
      scopes: ['devices:read', 'devices:act', 'devices:lease', 'runs:start'],
    };
    const req = node('node-req-parsed');
    expect(req.header).toMatchObject({
      t: 'req',
      from: b,
      deviceId: manifest.deviceId,
      epoch: manifest.epoch.before,
      id: 1,
      method: 'tools/call',
      scopes: caller.scopes,
      tokenId: manifest.tokenId,
    });
    expect(req.header.timeoutMs).toBeGreaterThan(0);
    expect(req.header.b).toBeUndefined();
    expect(JSON.parse(req.payload.toString())).toEqual({
      name: 'echo',
      arguments: { text: 'hello fixtures' },
      _meta: { 'phonebridge/caller': caller },
    });
    const reqBytes = node('node-req-bytes');
    expect(reqBytes.header).toMatchObject({ t: 'req', from: b, b: 1, method: 'resources/list', id: 2 });
    expect(JSON.parse(reqBytes.payload.toString())).toEqual({ _meta: { 'phonebridge/caller': caller } });

    const res = node('node-res');
    expect(res.header).toEqual({ t: 'res', rid: req.header.rid });
    expect(JSON.parse(res.payload.toString())).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: { content: [{ type: 'text', text: 'hello fixtures' }] },
    });
    const rel = node('node-rel');
    expect(rel.header).toMatchObject({ t: 'rel' });
    expect(JSON.parse(rel.payload.toString())).toMatchObject({
      method: 'notifications/progress',
      params: { progressToken: 'pt-1', progress: 1 },
    });
    const fail = node('node-fail');
    expect(fail.header).toMatchObject({ t: 'fail', rid: reqBytes.header.rid, error: { code: -32601 } });
    expect(fail.payload.length).toBe(0);
    const note = node('node-note');
    expect(note.header).toEqual({ t: 'note', deviceId: manifest.deviceId, method: 'notifications/roots/list_changed' });
    expect(JSON.parse(note.payload.toString())).toEqual({ _meta: { 'phonebridge/caller': caller } });
    expect(node('node-cancel').header).toEqual({ t: 'cancel', from: b, rid: 4 });
    expect(node('node-orphan').header).toEqual({ t: 'orphan', from: b, rid: 6 });
    expect(node('node-ccancel').header).toEqual({ t: 'ccancel', sessionId: manifest.sessionId, requestId: 5 });
    expect(node('node-redo').header).toEqual({ t: 'redo', rid: 999999, why: 'gone' });
    expect(node('node-bye').header).toEqual({ t: 'bye', from: b });
  });

  it('supersede notices, control events and device frames decode', () => {
    expect(decodeSupersede(bytes('supersede').toString())).toEqual({
      deviceId: manifest.deviceId,
      epoch: manifest.epoch.after,
    });
    for (const c of manifest.controls) expect(decodeControl(bytes(`control-${c.type}`).toString())).toEqual(c);
    expect(JSON.parse(decodeDeviceFrame(bytes('device-frame').toString()))).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/tools/list_changed',
    });
  });

  describe('on a real Redis, through a RedisBus', () => {
    const prefix = randomPrefix();
    let bus: RedisBus;
    let admin: Redis;
    // Time-based values are moved to now, keeping their distance from the capture.
    const shift = Date.now() - capturedAt;

    beforeAll(async () => {
      admin = new Redis(REDIS_URL);
      for (const r of records) {
        const k = prefix + r.key;
        if (r.type === 'string') await admin.set(k, r.value as string);
        else if (r.type === 'hash') await admin.hset(k, r.value as Record<string, string>);
        else if (r.type === 'list') await admin.rpush(k, ...(r.value as string[]));
        else if (r.type === 'set') await admin.sadd(k, ...(r.value as string[]));
        else if (r.type === 'zset')
          for (const [member, score] of r.value as Array<[string, number]>)
            // liveness deadlines are a few seconds ahead: give the old nodes a minute
            await admin.zadd(k, r.key === 'nodes' ? Date.now() + 60_000 : score + shift, member);
        else throw new Error(`no loader for ${r.type}`);
        if (r.ttl > 0) await admin.pexpire(k, r.ttl);
      }
      bus = await RedisBus.connect(REDIS_URL, 'reader', quietLog, { prefix });
    });
    afterAll(async () => {
      await bus?.close();
      admin?.disconnect();
      await dropPrefix(prefix);
    });

    it('reads the session, its indexes and its replay buffer', async () => {
      const stored = JSON.parse(records.find((r) => r.key === `sess:${manifest.sessionId}`)!.value.rec as string);
      const s = await bus.sessions.touch(manifest.sessionId, 60_000);
      expect(s).toEqual({ ...stored, lastSeenAt: s!.lastSeenAt });
      expect(s).toMatchObject({ id: manifest.sessionId, tokenId: manifest.tokenId, deviceId: manifest.deviceId });
      expect(await bus.sessions.countForDevice(manifest.deviceId)).toBe(1);
      const [first, second] = await bus.replayAfter(manifest.sessionId, `${manifest.replay.streamId}:0`);
      expect(first).toEqual({
        id: manifest.replay.ids[0],
        data: '{"jsonrpc":"2.0","method":"notifications/progress"}',
      });
      expect(second).toEqual({ id: manifest.replay.ids[1], data: 'data with\nnewline and ünïcode' });
      // The sequence goes on from the old record's.
      const next = Number(manifest.replay.ids[1].split(':').pop()) + 1;
      expect(await bus.appendEvent(manifest.sessionId, manifest.replay.streamId, 'x')).toBe(
        `${manifest.replay.streamId}:${next}`,
      );
    });

    it('reads ownership, liveness, nonces and counters, and claims over an old ownership record', async () => {
      expect(await bus.ownerOf(manifest.deviceId)).toEqual({ nodeId: a, epoch: manifest.epoch.before });
      expect((await bus.aliveNodes()).sort()).toEqual([a, b, 'reader'].sort());
      expect(decodeBoot((await admin.hget(`${prefix}boots`, a))!).v).toBe(1);
      expect(await bus.takeNonce('nonce_fixture')).toBe(manifest.deviceId);
      expect(await bus.peek('moving:dev_moving_fixture')).toBe(1);
      // A claim over the old record: the epoch goes on, the old owner's node channel is told.
      const heard = new Redis(REDIS_URL);
      const notices: string[] = [];
      try {
        heard.on('message', (_c: string, m: string) => notices.push(m));
        await heard.subscribe(`${prefix}ch:node:${a}`);
        expect(await bus.claimDevice(manifest.deviceId)).toBe(manifest.epoch.before + 1);
        await waitFor(() => notices.length === 1, 2000, 'the supersede notice');
      } finally {
        heard.disconnect();
      }
      expect(decodeSupersede(notices[0])).toEqual({ deviceId: manifest.deviceId, epoch: manifest.epoch.before + 1 });
      expect(await bus.ownerOf(manifest.deviceId)).toEqual({ nodeId: 'reader', epoch: manifest.epoch.before + 1 });
      expect(await bus.sessions.deleteWhere({ tokenId: manifest.tokenId })).toBe(1);
    });

    it('delivers the old messages to its handlers as the old node meant them', async () => {
      const got = { control: [] as ControlEvent[], superseded: [] as Array<[string, number]>, frames: [] as string[] };
      const bodies: Buffer[] = [];
      bus.onControl((e) => got.control.push(e));
      bus.onSuperseded((d, e) => got.superseded.push([d, e]));
      bus.onNodeBytes((m, s, e) => bodies.push(Buffer.from(m.subarray(s, e))));
      const leave = await bus.subscribeDevice(manifest.deviceId, (f) => got.frames.push(f));
      try {
        for (const m of manifest.messages) {
          const channel =
            m.channel === 'ch:control'
              ? `${prefix}ch:control`
              : m.channel.startsWith('ch:dev:')
                ? `${prefix}ch:dev:${manifest.deviceId}`
                : `${prefix}ch:node:reader`;
          await admin.publish(channel, bytes(m.kind));
        }
        const nodeKinds = manifest.messages.filter((m) => m.kind.startsWith('node-')).length;
        await waitFor(() => bodies.length === nodeKinds && got.control.length === manifest.controls.length, 3000);
        await sleep(100);
      } finally {
        leave();
      }
      expect(got.control).toEqual(manifest.controls);
      expect(got.superseded).toEqual([[manifest.deviceId, manifest.epoch.after]]);
      expect(got.frames.map((f) => JSON.parse(f).method)).toEqual(['notifications/tools/list_changed']);
      for (const body of bodies) expect(() => decodeNodeMessage(body)).not.toThrow();
      expect(bodies.map((body) => decodeNodeMessage(body).header.t).sort()).toEqual(
        manifest.messages
          .filter((m) => m.kind.startsWith('node-'))
          .map((m) => m.kind.split('-')[1])
          .sort(),
      );
    });
  });
});
