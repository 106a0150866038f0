// Captures every bus message kind and Redis record as a given revision writes them, byte for
// byte, into test/fixtures/formats/<name>/ (docs/decisions/0200-bus-and-record-format-versions.md).
// The revision's own code runs in a temporary git worktree (its node_modules a symlink to this
// checkout's): two real relay nodes on real Redis and Postgres, a real phone and raw MCP
// traffic, while a raw subscriber records every message on the prefix's channels; the keys
// under the prefix are dumped afterwards. Some rarer kinds are triggered by calling the old
// code's own functions (a claim, a control event), never by writing the bytes here.
//
//   npx tsx scripts/capture-format-fixtures.ts --rev fe50efd --name v1
//
// Needs Redis on 127.0.0.1:6379 and Postgres on 127.0.0.1:5432 (PHONEBRIDGE_TEST_REDIS_URL,
// PHONEBRIDGE_TEST_DATABASE_URL). The fixtures are frozen once committed: capture a new set
// under a new name whenever a format changes, never overwrite one.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import type * as TwoNodesModule from '../test/helpers/two-nodes.ts';
import type * as RelayModule from '../test/helpers/relay.ts';
import type { ControlEvent } from '../src/bus/index.ts';
import type * as EchoModule from '../test/fixtures/echo-server.ts';

const here = resolve(fileURLToPath(new URL('..', import.meta.url)));
const { values } = parseArgs({
  options: { rev: { type: 'string', default: 'fe50efd' }, name: { type: 'string', default: 'v1' } },
});
const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const outDir = join(here, 'test/fixtures/formats', values.name);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A worktree of `rev` under a temp dir; removed again by the returned function. */
function worktree(rev: string): { dir: string; remove(): void } {
  const base = mkdtempSync(join(tmpdir(), 'pb-fixtures-'));
  const dir = join(base, 'tree');
  execFileSync('git', ['-C', here, 'worktree', 'add', '--detach', dir, rev], { stdio: 'ignore' });
  symlinkSync(join(here, 'node_modules'), join(dir, 'node_modules'));
  return {
    dir,
    remove() {
      execFileSync('git', ['-C', here, 'worktree', 'remove', '--force', dir], { stdio: 'ignore' });
      rmSync(base, { recursive: true, force: true });
    },
  };
}

interface Captured {
  channel: string;
  bytes: Buffer;
}

async function main(): Promise<void> {
  if (existsSync(outDir)) throw new Error(`${outDir} exists: fixtures are frozen; pick another --name`);
  const tree = worktree(values.rev);
  const mod = async <T>(path: string) => (await import(pathToFileURL(join(tree.dir, path)).href)) as T;
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    const { startTwoNodes } = await mod<typeof TwoNodesModule>('test/helpers/two-nodes.ts');
    const { startTestPhone } = await mod<typeof RelayModule>('test/helpers/relay.ts');
    const { createEchoServer } = await mod<typeof EchoModule>('test/fixtures/echo-server.ts');
    const nodes = await startTwoNodes(['--request-timeout-ms', '1500']);
    cleanup.push(() => nodes.stop());
    const { a, b, prefix } = nodes;
    const busA = a.relay.node.ctx.bus;
    const busB = b.relay.node.ctx.bus;

    // Every message on the prefix's channels, as bytes.
    const captured: Captured[] = [];
    const sub = new Redis(REDIS_URL);
    cleanup.push(() => Promise.resolve(sub.disconnect()));
    sub.on('pmessageBuffer', (_p: Buffer, channel: Buffer, msg: Buffer) =>
      captured.push({ channel: channel.toString('utf8'), bytes: Buffer.from(msg) }),
    );
    await sub.psubscribe(`${prefix}ch:*`);

    const phone = await startTestPhone(a, () => createEchoServer());
    cleanup.push(() => phone.stop());
    const key = await b.key(phone.deviceId);
    const headers = (sid?: string, accept = 'application/json, text/event-stream') => ({
      'content-type': 'application/json',
      accept,
      'x-api-key': key.token,
      'mcp-protocol-version': '2025-11-25',
      ...(sid ? { 'mcp-session-id': sid } : {}),
    });
    const post = (url: string, sid: string | undefined, body: unknown, signal?: AbortSignal) =>
      fetch(url, { method: 'POST', headers: headers(sid), body: JSON.stringify(body), signal });
    const init = await post(b.mcpUrl, undefined, {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'fixtures', version: '1' } },
    });
    await init.text();
    const sid = init.headers.get('mcp-session-id')!;
    const call = (id: number, name: string, args: unknown, meta?: unknown, signal?: AbortSignal, url = b.mcpUrl) =>
      post(
        url,
        sid,
        {
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) },
        },
        signal,
      );

    // req (bytes path) + res
    await (await call(1, 'echo', { text: 'hello fixtures' })).text();
    // req (parsed path) + res: a method the origin forwards as parsed JSON
    await (await post(b.mcpUrl, sid, { jsonrpc: '2.0', id: 2, method: 'resources/list', params: {} })).text();
    // rel: progress for a request with a progress token travels as related frames
    await (await call(3, 'progress', { n: 2, text: 'step', delayMs: 5 }, { progressToken: 'pt-1' })).text();
    // note: a client notification for the phone
    await (await post(b.mcpUrl, sid, { jsonrpc: '2.0', method: 'notifications/roots/list_changed' })).text();
    // cancel: the client cancels its own request on the node answering it
    const slow = call(4, 'sleep', { ms: 1000 });
    await sleep(200);
    await (
      await post(b.mcpUrl, sid, {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 4, reason: 'fixture' },
      })
    ).text();
    await (await slow).text().catch(() => '');
    // ccancel: the cancel reaches a node that is not answering the request
    const slow2 = call(5, 'sleep', { ms: 1000 });
    await sleep(200);
    await (
      await post(a.mcpUrl, sid, {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 5, reason: 'fixture' },
      })
    ).text();
    await (await slow2).text().catch(() => '');
    // orphan: the client leaves a request it sent as plain JSON
    const gone = new AbortController();
    const abandoned = fetch(b.mcpUrl, {
      method: 'POST',
      headers: headers(sid, 'application/json'),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 6,
        method: 'tools/call',
        params: { name: 'sleep', arguments: { ms: 800 } },
      }),
      signal: gone.signal,
    }).catch(() => undefined);
    await sleep(200);
    gone.abort();
    await abandoned;
    await sleep(900);
    // fail: the owner's deadline (--request-timeout-ms 1500) passes first
    await (await call(7, 'sleep', { ms: 2500 })).text();
    // device channel: a stream on b listens to the phone; the phone's unrelated list_changed fans out
    const stream = new AbortController();
    const get = fetch(b.mcpUrl, { headers: headers(sid, 'text/event-stream'), signal: stream.signal })
      .then((r) => r.body?.getReader().read())
      .catch(() => undefined);
    await sleep(300);
    await (await call(8, 'add_tool', {})).text();
    await sleep(300);
    stream.abort();
    await get;
    // redo: a request for a phone node a does not hold (its header is this script's; the answer a's)
    await busB.sendToNode(
      busA.nodeId,
      `${JSON.stringify({ t: 'req', from: busB.nodeId, rid: 999999, deviceId: 'dev_not_here', epoch: 1, id: 9, method: 'ping', scopes: [], timeoutMs: 1000 })}\n`,
    );
    // control events: each kind as the old code publishes it
    const controls = [
      { type: 'device_removed', deviceId: 'dev_fixture' },
      { type: 'token_revoked', tokenId: 'tok_fixture' },
      { type: 'credential_revoked', credential: 'tok_fixture', deviceId: 'dev_fixture' },
      { type: 'account_locked', accountId: 'acct_fixture', locked: true },
      { type: 'sessions_ended', sessionIds: ['sess_fixture'] },
    ] satisfies ControlEvent[];
    for (const c of controls) await busA.publishControl(c);
    // records that are short-lived or rare: a nonce, a moving mark, a replay buffer
    await busA.putNonce('nonce_fixture', phone.deviceId, 600_000);
    await a.relay.node.ctx.router.markMoving('dev_moving_fixture');
    const ev1 = await busA.appendEvent(sid, 'stream_fixture', '{"jsonrpc":"2.0","method":"notifications/progress"}');
    const ev2 = await busA.appendEvent(sid, 'stream_fixture', 'data with\nnewline and ünïcode');
    await sleep(300);

    // Redis records, as the old code left them.
    const r = new Redis(REDIS_URL);
    cleanup.push(() => Promise.resolve(r.disconnect()));
    const keys = (await r.keys(`${prefix}*`)).sort();
    const records: Array<{ key: string; type: string; ttl: number; value: unknown }> = [];
    const capturedAt = Date.now();
    for (const k of keys) {
      const type = await r.type(k);
      const ttl = await r.pttl(k);
      let value: unknown;
      if (type === 'string') value = await r.get(k);
      else if (type === 'hash') value = await r.hgetall(k);
      else if (type === 'list') value = await r.lrange(k, 0, -1);
      else if (type === 'set') value = (await r.smembers(k)).sort();
      else if (type === 'zset') {
        const flat = await r.zrange(k, '0', '-1', 'WITHSCORES');
        const z: Array<[string, number]> = [];
        for (let i = 0; i < flat.length; i += 2) z.push([flat[i], Number(flat[i + 1])]);
        value = z;
      }
      records.push({ key: k.slice(prefix.length), type, ttl, value });
    }

    // supersede: b claims the phone node a holds (last: a then closes the phone's socket)
    const epochBefore = (await busB.ownerOf(phone.deviceId))!.epoch;
    const epochAfter = await busB.claimDevice(phone.deviceId);
    await sleep(300);
    // bye: b stops on purpose and says goodbye to a
    await b.stop();
    await sleep(300);

    // Write: one file per message (its exact bytes), the records, and what they stand for.
    mkdirSync(join(outDir, 'messages'), { recursive: true });
    const chan = (c: string) => c.slice(prefix.length);
    const seen = new Map<string, number>();
    const messages: Array<{ file: string; channel: string; kind: string }> = [];
    for (const m of captured) {
      const channel = chan(m.channel);
      let kind: string;
      if (channel === 'ch:control') kind = `control-${(JSON.parse(m.bytes.toString('utf8')) as { type: string }).type}`;
      else if (channel.startsWith('ch:dev:')) kind = 'device-frame';
      else if (m.bytes[0] === 0x73) kind = 'supersede';
      else if (m.bytes[0] === 0x6d) {
        const nl = m.bytes.indexOf(0x0a);
        const h = JSON.parse(m.bytes.toString('utf8', 1, nl)) as { t: string; b?: number; from?: string; rid?: number };
        if (h.t === 'req' && h.from === busB.nodeId && h.rid === 999999) continue; // ours
        kind = `node-${h.t}${h.t === 'req' ? (h.b ? '-bytes' : '-parsed') : ''}`;
      } else kind = 'unknown';
      const n = (seen.get(kind) ?? 0) + 1;
      seen.set(kind, n);
      if (n > 1) continue; // one of each kind
      const file = `messages/${kind}.bin`;
      writeFileSync(join(outDir, file), m.bytes);
      messages.push({ file, channel, kind });
    }
    writeFileSync(join(outDir, 'records.json'), JSON.stringify({ capturedAt, records }, null, 2) + '\n');
    const manifest = {
      rev: execFileSync('git', ['-C', here, 'rev-parse', values.rev], { encoding: 'utf8' }).trim(),
      note: 'Written by scripts/capture-format-fixtures.ts; frozen: never edit or regenerate, add a new set instead.',
      nodes: { a: busA.nodeId, b: busB.nodeId },
      deviceId: phone.deviceId,
      tokenId: key.id,
      sessionId: sid,
      epoch: { before: epochBefore, after: epochAfter },
      replay: { streamId: 'stream_fixture', ids: [ev1, ev2] },
      controls,
      messages,
    };
    writeFileSync(join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
    console.log(
      `wrote ${messages.length} messages (${[...seen.keys()].join(', ')}) and ${records.length} records to ${outDir}`,
    );
  } finally {
    for (const f of cleanup.reverse()) await f().catch(() => {});
    tree.remove();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
