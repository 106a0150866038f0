// Requests crossing nodes: three `phonebridge serve` processes on one Redis and one Postgres,
// a phone on node A, clients on B and C. Calls, notifications, progress, cancellation,
// sessions that move between nodes, id collisions under concurrency, removal from the CLI.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { cli } from '../helpers/processes.ts';
import { firstProgressEventId, sseMessages } from '../helpers/relay.ts';
import {
  outcome,
  PROTOCOL,
  rawClient,
  startTestCluster,
  waitFor,
  type ClusterPhone,
  type TestCluster,
} from './harness.ts';
import type { ClusterNode } from '../../services/cluster.ts';
import { cpSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { DeviceAgent, loadIdentity, silentLogger } from '../../src/device/agent/index.ts';
import { saveIdentity } from '../../src/device/agent/state.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';
import { decodeNodeMessage } from '../../src/bus/formats.ts';
import { RedisBus } from '../../src/bus/redis/index.ts';
import { quietLog, REDIS_URL } from '../../src/bus/redis/test-support.ts';
import { farewellMessage } from '../../src/gateway/node-messages.ts';
import { MOVE_GRACE_MS, movingKey } from '../../src/gateway/router.ts';

let tc: TestCluster;
let A: ClusterNode, B: ClusterNode, C: ClusterNode;
let phone: ClusterPhone;
let token: string;

beforeAll(async () => {
  tc = await startTestCluster({ nodes: 3, serveArgs: ['--request-timeout-ms', '15000'] });
  [A, B, C] = tc.nodes;
  phone = await tc.phone({ node: A, name: 'phone on A' });
  token = await tc.key(phone.deviceId);
  expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);
}, 90_000);

afterAll(async () => {
  await tc?.stop();
}, 60_000);

/** An SDK client whose POSTs go to `post` and whose GET stream goes to `get`. */
async function splitClient(post: ClusterNode, get: ClusterNode, opts: { sessionId?: string } = {}) {
  const seen: Array<{ method: string; node: string; status?: number }> = [];
  let getOpen = false;
  const transport = new StreamableHTTPClientTransport(new URL(`${post.url}/mcp`), {
    sessionId: opts.sessionId,
    requestInit: { headers: { 'X-Api-Key': token } },
    fetch: async (url, init) => {
      const method = init?.method ?? 'GET';
      const target = method === 'GET' ? new URL(new URL(String(url)).pathname, get.url) : url;
      const res = await fetch(target, init);
      seen.push({ method, node: method === 'GET' ? get.id : post.id, status: res.status });
      if (method === 'GET' && res.status === 200) getOpen = true;
      return res;
    },
  });
  const sent: string[] = [];
  const send = transport.send.bind(transport);
  transport.send = (msg, o) => {
    if ('method' in msg) sent.push(msg.method);
    return send(msg, o);
  };
  const client = new Client({ name: 'cluster-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, seen, sent, getOpen: () => getOpen };
}

describe('a phone on node A, a client on node B', () => {
  it('calls tools, gets notifications on a GET stream held by node C, progress on its own POST stream', async () => {
    const { client, transport, seen } = await splitClient(B, C);
    const r = await client.callTool({ name: 'echo', arguments: { text: 'across nodes' } });
    expect(r.content).toEqual([{ type: 'text', text: 'across nodes' }]);
    expect(await tc.ownerOf(phone.deviceId)).toBe(A.id);

    // Notifications: the phone (A) → the device channel → the session's GET stream on C.
    const notes: string[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void notes.push(String(n.params.data)));
    await waitFor(() => seen.some((s) => s.method === 'GET' && s.status === 200), 10_000, 'GET stream on C');
    await client.callTool({ name: 'notify', arguments: { text: 'hello from A' } });
    await waitFor(() => notes.includes('hello from A'), 5000, 'notification through C');

    // Progress: relay-unique token on the phone, the client's own token back, on the POST's SSE stream.
    const progress: Array<{ progress: number; message?: string }> = [];
    const p = await client.callTool({ name: 'progress', arguments: { text: 'step', n: 4 } }, undefined, {
      onprogress: (e) => void progress.push({ progress: e.progress, message: e.message }),
    });
    expect(p.content).toEqual([{ type: 'text', text: 'step done' }]);
    expect(progress).toEqual([1, 2, 3, 4].map((i) => ({ progress: i, message: `step ${i}` })));

    expect(new Set(seen.filter((s) => s.method === 'POST').map((s) => s.node))).toEqual(new Set([B.id]));
    expect(new Set(seen.filter((s) => s.method === 'GET').map((s) => s.node))).toEqual(new Set([C.id]));
    await transport.terminateSession();
    await client.close();
  });

  it('cancels across nodes: notifications/cancelled reaches the phone; closing the POST alone does not cancel', async () => {
    const { client } = await splitClient(B, C);
    const before = phone.control.cancellations;

    // 1. The SDK's AbortSignal: it sends notifications/cancelled to B, B cancels the request on A.
    const ac = new AbortController();
    const calls = phone.control.calls.length;
    const pending = client.callTool({ name: 'sleep', arguments: { ms: 20_000 } }, undefined, { signal: ac.signal });
    await waitFor(() => phone.control.calls.length > calls, 5000, 'sleep reached the phone');
    const t0 = Date.now();
    ac.abort('test cancels');
    await expect(pending).rejects.toThrow();
    await waitFor(() => phone.control.cancellations === before + 1, 5000, 'phone saw notifications/cancelled');
    const viaNotification = Date.now() - t0;

    // 2. Closing the HTTP request is not a cancellation in session revisions: the call runs on
    //    at A. The client's notifications/cancelled, sent to C, then cancels it at A.
    const raw = await rawClient(C.url, token);
    const ac2 = new AbortController();
    const calls2 = phone.control.calls.length;
    const closed = raw.call(B.url, 7, 'sleep', { ms: 20_000 }, { signal: ac2.signal }).catch((e) => e);
    await waitFor(() => phone.control.calls.length > calls2, 5000, 'second sleep reached the phone');
    ac2.abort();
    expect(String(await closed)).toMatch(/abort/i);
    await new Promise((r) => setTimeout(r, 500));
    expect(phone.control.cancellations).toBe(before + 1);
    const t1 = Date.now();
    expect(
      (
        await raw.post(C.url, {
          jsonrpc: '2.0',
          method: 'notifications/cancelled',
          params: { requestId: 7, reason: 'test cancels' },
        })
      ).status,
    ).toBe(202);
    await waitFor(
      () => phone.control.cancellations === before + 2,
      5000,
      'phone saw the second notifications/cancelled',
    );
    console.log(
      `cancellation across nodes: ${viaNotification} ms via notifications/cancelled, ${Date.now() - t1} ms via notifications/cancelled after the POST was closed`,
    );
    await raw.close();
    await client.close();
  });
});

describe('a POST stream resumed on another node', () => {
  it('a call whose POST stream (node B) drops is followed to its answer by a GET with Last-Event-ID on node C', async () => {
    const raw = await rawClient(B.url, token);
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': token,
      'mcp-session-id': raw.sessionId,
      'mcp-protocol-version': PROTOCOL,
    };
    const ac = new AbortController();
    const res = await fetch(`${B.url}/mcp`, {
      method: 'POST',
      signal: ac.signal,
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'far',
        method: 'tools/call',
        params: { name: 'progress', arguments: { text: 'hop', n: 30, delayMs: 50 }, _meta: { progressToken: 't' } },
      }),
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const lastId = await firstProgressEventId(res);
    ac.abort();
    const again = await fetch(`${C.url}/mcp`, {
      headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastId },
    });
    expect(again.status).toBe(200);
    const replay = await again.text(); // ends after the answer
    const messages = sseMessages(replay);
    expect(messages.find((m) => m.id === 'far')?.result?.content?.[0]?.text).toBe('hop done');
    const steps = messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    expect(steps.at(-1)).toBe(30);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    await raw.close();
  });
});

describe('cancellation without sticky load balancing', () => {
  it("a client's notifications/cancelled that lands on another node than its request still reaches the phone", async () => {
    const raw = await rawClient(A.url, token);
    const before = phone.control.cancellations;
    const calls = phone.control.calls.length;
    const pending = raw.call(B.url, 'slow-1', 'sleep', { ms: 20_000 });
    await waitFor(() => phone.control.calls.length > calls, 5000, 'sleep reached the phone');
    const note = await raw.post(C.url, {
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 'slow-1', reason: 'changed my mind' },
    });
    expect(note.status).toBe(202);
    const answer = await pending;
    expect(answer.error?.data?.code).toBe('cancelled');
    await waitFor(() => phone.control.cancellations === before + 1, 5000, 'phone saw notifications/cancelled');
    await raw.close();
  });
});

describe('sessions without sticky load balancing', () => {
  it('a session initialized via node A continues via B and C with no re-initialize', async () => {
    const raw = await rawClient(A.url, token);
    const sessionId = raw.sessionId;
    expect(outcome(await raw.call(A.url, 1, 'echo', { text: 'on A' }))).toBe('on A');

    for (const node of [B, C]) {
      const { client, sent, transport } = await splitClient(node, node, { sessionId });
      expect(transport.sessionId).toBe(sessionId);
      const r = await client.callTool({ name: 'echo', arguments: { text: `on ${node.id}` } });
      expect(r.content).toEqual([{ type: 'text', text: `on ${node.id}` }]);
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name)).toContain('echo');
      expect(sent).not.toContain('initialize');
      await client.close();
    }
    // And through the front, whichever node it picks.
    for (let i = 0; i < 3; i++)
      expect(outcome(await raw.call(tc.url, 10 + i, 'echo', { text: `front ${i}` }))).toBe(`front ${i}`);
    // Deleted on C: gone on A too.
    const del = await fetch(`${C.url}/mcp`, {
      method: 'DELETE',
      headers: { 'x-api-key': token, 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL },
    });
    expect(del.status).toBe(200);
    expect((await raw.post(A.url, { jsonrpc: '2.0', id: 99, method: 'tools/list' })).status).toBe(404);
    await raw.close();
  });
});

describe('no cross-talk', () => {
  it('colliding client ids from clients on three nodes, two phones, concurrently (3,000 calls)', async () => {
    const phone2 = await tc.phone({ node: B, name: 'phone on B' });
    const token2 = await tc.key(phone2.deviceId);
    const PER_CLIENT = 500;
    const CONCURRENCY = 16;
    const clients = await Promise.all(
      [A, B, C].flatMap((node) => [
        rawClient(node.url, token).then((c) => ({ c, node, tag: `${node.id}/p1` })),
        rawClient(node.url, token2).then((c) => ({ c, node, tag: `${node.id}/p2` })),
      ]),
    );
    let wrong = 0;
    let total = 0;
    const t0 = Date.now();
    await Promise.all(
      clients.map(async ({ c, node, tag }) => {
        let next = 1;
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (next <= PER_CLIENT) {
              const id = next++;
              const r = await c.post(node.url, {
                jsonrpc: '2.0',
                id,
                method: 'tools/call',
                params: { name: 'echo', arguments: { text: `${tag}#${id}` } },
              });
              total++;
              if (r.json?.id !== id || outcome(r.json) !== `${tag}#${id}`) {
                if (wrong++ < 5) console.error('cross-talk', tag, id, r.status, r.text.slice(0, 200));
              }
            }
          }),
        );
      }),
    );
    const ms = Date.now() - t0;
    console.log(
      `no cross-talk: ${total} calls from 6 clients on 3 nodes to 2 phones in ${ms} ms (${Math.round((total / ms) * 1000)}/s)`,
    );
    expect(total).toBe(6 * PER_CLIENT);
    expect(wrong).toBe(0);
    await Promise.all(clients.map(({ c }) => c.close()));
    await phone2.stop();
  }, 90_000);
});

describe('large answers across nodes', () => {
  it('reach clients on B intact, 24 at a time, out of reused buffers on A (docs/decisions/0235-pooled-answer-buffers.md)', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${B.url}/mcp`), {
      requestInit: { headers: { 'X-Api-Key': token } },
    });
    const client = new Client({ name: 'large-answers', version: '1.0.0' });
    await client.connect(transport);
    for (let round = 0; round < 3; round++)
      await Promise.all(
        Array.from({ length: 24 }, async (_, i) => {
          // Half small (a slice of Node's shared pool), a quarter 4 to 8 KiB, a quarter up to 124 KiB.
          const k = round * 24 + i;
          const n = k % 2 ? 50 + k : k % 4 ? 4096 + ((k * 37) % 3900) : 4096 + ((k * 7919) % (120 * 1024));
          const text = randomBytes(n).toString('base64').slice(0, n);
          const r = await client.callTool({ name: 'echo', arguments: { text } });
          expect((r.content as Array<{ text: string }>)[0].text === text).toBe(true);
        }),
      );
    await client.close();
    // A keeps the buffers its answers went out of once Redis confirms it read them (within the
    // quiet connection's 100 ms), after the clients have their answers.
    const held = async () =>
      Number(
        /^phonebridge_answer_buffers_bytes (\d+)/m.exec(
          await (await fetch(`http://127.0.0.1:${A.adminPort}/metrics`)).text(),
        )?.[1],
      );
    await waitFor(async () => (await held()) > 0, 5000, 'answer buffers back on A');
    expect(await held()).toBeLessThanOrEqual(8 * 1024 * 1024);
  }, 60_000);
});

describe('device removal from the CLI', () => {
  it('closes the socket with 4004 on whichever node holds it, within one second of the CLI exiting', async () => {
    const victim = await tc.phone({ node: C, name: 'to be removed' });
    expect(await tc.ownerOf(victim.deviceId)).toBe(C.id);
    let closedAt = 0;
    victim.agent.on('disconnected', (e) => {
      if (e.code === 4004) closedAt = Date.now();
    });
    const stopped = victim.agent.whenStopped();
    await cli(['devices', 'remove', victim.deviceId, '--database-url', tc.databaseUrl]);
    const exitedAt = Date.now();
    const stop = await stopped;
    expect(stop).toMatchObject({ reason: 'removed', code: 4004 });
    const after = closedAt - exitedAt;
    console.log(`device removal: socket closed 4004 ${after} ms after the CLI exited (journal poll 250 ms)`);
    expect(after).toBeLessThan(1000);
    // Its sessions and keys are gone everywhere; the phone on A is untouched.
    const raw = await rawClient(A.url, token);
    expect(outcome(await raw.call(B.url, 1, 'echo', { text: 'still here' }))).toBe('still here');
    await raw.close();
  });
});

describe('supersede across nodes', () => {
  it('a phone reconnecting to B closes its socket on A with 4001 and fails the requests in flight on A at once', async () => {
    const moving = await tc.phone({ node: A, name: 'supersede me' });
    const t = await tc.key(moving.deviceId);
    const client = await rawClient(C.url, t);
    await client.initialize(C.url);
    const t0 = Date.now();
    const inflight = client.call(C.url, 1, 'sleep', { ms: 12_000 });
    await waitFor(
      () => moving.control.calls.some((c) => c.name === 'sleep'),
      10_000,
      'sleep running on the phone via A',
    );

    // A second instance of the same phone (same key) connects straight to B.
    const dir = mkdtempSync(join(tmpdir(), 'pb-sup-'));
    cpSync(moving.stateDir, dir, { recursive: true });
    saveIdentity(dir, { ...loadIdentity(dir)!, relay: B.url });
    const control: EchoServerControl = { calls: [], cancellations: 0 };
    const second = new DeviceAgent({ stateDir: dir, createServer: () => createEchoServer(control), log: silentLogger });
    second.start();
    try {
      await waitFor(async () => (await tc.ownerOf(moving.deviceId)) === B.id, 10_000, 'B owns the phone');
      await waitFor(() => moving.closes.includes(4001), 5000, 'old socket closed with 4001');
      const answer = await inflight;
      expect(outcome(answer)).toBe('error:superseded');
      expect(Date.now() - t0).toBeLessThan(8000); // not the 12 s sleep, not the 15 s timeout
      // The client's next call reaches the phone on B.
      expect(outcome(await client.call(C.url, 2, 'echo', { text: 'on B' }))).toBe('on B');
      expect(control.calls.map((c) => c.name)).toContain('echo');
    } finally {
      await second.stop();
      await client.close();
    }
  }, 60_000);
});

describe('a node that leaves on purpose', () => {
  // What a draining node does last: its phones are marked moving and released, and it says
  // goodbye. A request that reached it and was never answered (it arrived after the node had
  // stopped starting work) is routed again to the phone's next node, not failed. Node Z is a
  // bare bus node in this process, so the test decides exactly when it leaves.
  it('requests it never answered are routed again to where the phone went', async () => {
    const p = await tc.phone({ node: A, name: 'leaves Z' });
    const t = await tc.key(p.deviceId);
    await p.stop();
    await waitFor(async () => (await tc.ownerOf(p.deviceId)) === undefined, 10_000, 'phone released');

    const z = await RedisBus.connect(REDIS_URL, `z-${Date.now()}`, quietLog, { prefix: tc.prefix });
    const heard: string[] = [];
    z.onNodeMessage((m) => heard.push(m));
    const client = await rawClient(B.url, t);
    const control: EchoServerControl = { calls: [], cancellations: 0 };
    const again = new DeviceAgent({
      stateDir: p.stateDir,
      createServer: () => createEchoServer(control),
      log: silentLogger,
      backoff: { baseMs: 50, capMs: 500 },
    });
    try {
      const epoch = await z.claimDevice(p.deviceId);
      await client.initialize(B.url);
      const pending = client.call(B.url, 1, 'echo', { text: 'routed again' });
      await waitFor(
        () => heard.some((m) => decodeNodeMessage(Buffer.from(m)).header.t === 'req'),
        10_000,
        'the request reached Z',
      );

      await z.hit(movingKey(p.deviceId), MOVE_GRACE_MS);
      await z.releaseDevice(p.deviceId, epoch);
      await z.sendToNode(B.id, farewellMessage(z.nodeId));
      again.start(); // the phone comes back, on A
      expect(outcome(await pending)).toBe('routed again');
      expect(control.calls.map((c) => c.name)).toEqual(['echo']);
      expect(await tc.ownerOf(p.deviceId)).toBe(A.id);
    } finally {
      await again.stop();
      await client.close();
      await z.close();
    }
  }, 60_000);
});
