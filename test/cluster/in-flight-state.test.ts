// What a cross-node call leaves behind on both nodes once it ends (answered, aborted by its
// client, cancelled, timed out with a late answer from the phone): nothing. Two relay nodes in
// this process (test/helpers/two-nodes.ts), the phone on A, clients on B: every call crosses
// the bus.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { startTestPhone, waitFor, type TestPhone } from '../helpers/relay.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';
import { openSession, toolCall } from '../helpers/raw-mcp.ts';

let nodes: TwoNodes;
let phone: TestPhone;
let token: string;
const control: EchoServerControl = { calls: [], cancellations: 0 };
const V = '2026-07-28';
const meta = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

beforeAll(async () => {
  nodes = await startTwoNodes(['--request-timeout-ms', '3000']);
  phone = await startTestPhone(nodes.a, () => createEchoServer(control));
  token = (await nodes.a.key(phone.deviceId)).token;
}, 60_000);

afterAll(async () => {
  await phone?.stop();
  await nodes?.stop();
}, 60_000);

/** The tables a call is entered in, on both nodes. */
function tables() {
  const ra = nodes.a.relay.node.ctx.router as any;
  const rb = nodes.b.relay.node.ctx.router as any;
  const conn = nodes.a.relay.node.ctx.hub.device(phone.deviceId)!;
  return {
    bActive: rb.active.size as number,
    bRemote: rb.remote.pending.size as number,
    aServed: ra.served.served.size as number,
    aActive: ra.active.size as number,
    aPhone: conn.inFlight,
  };
}
const empty = { bActive: 0, bRemote: 0, aServed: 0, aActive: 0, aPhone: 0 };
const calls = (name: string) => control.calls.filter((c) => c.name === name).length;

/** A session on B; `fast`: warmed by one call, so B leases it and knows the owner (FastPost, startRemote). */
async function session(fast: boolean): Promise<Record<string, string>> {
  const h = await openSession(nodes.b.mcpUrl, token);
  if (fast) {
    const r = await fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: h,
      body: toolCall('warm', 'echo', { text: 'w' }),
    });
    expect(await r.json()).toMatchObject({ id: 'warm' });
  }
  return h;
}

describe.each([false, true])('a cross-node call leaves nothing behind (fast path: %s)', (fast) => {
  it('answered, then the same id again in the session', async () => {
    const h = await session(fast);
    for (let i = 0; i < 3; i++) {
      const r = await fetch(nodes.b.mcpUrl, {
        method: 'POST',
        headers: h,
        body: toolCall(7, 'echo', { text: `t${i}` }),
      });
      const j = await r.json();
      expect(j).toMatchObject({ id: 7, result: { content: [{ text: `t${i}` }] } });
    }
    await waitFor(() => JSON.stringify(tables()) === JSON.stringify(empty), 3000, 'tables empty');
  });

  it('the client closes its POST mid-call (session revision): the call runs on, then everything is freed', async () => {
    const h = await session(fast);
    const ac = new AbortController();
    const before = calls('sleep');
    const p = fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: { ...h, accept: 'application/json' },
      body: toolCall('gone', 'sleep', { ms: 600 }),
      signal: ac.signal,
    }).catch(() => 'aborted');
    await waitFor(() => calls('sleep') > before, 3000, 'sleep on the phone');
    ac.abort();
    expect(await p).toBe('aborted');
    await waitFor(
      () => JSON.stringify(tables()) === JSON.stringify(empty),
      4000,
      `tables empty: ${JSON.stringify(tables())}`,
    );
    // The id is free again in the session.
    const r = await fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: h,
      body: toolCall('gone', 'echo', { text: 'again' }),
    });
    expect(await r.json()).toMatchObject({ id: 'gone', result: { content: [{ text: 'again' }] } });
  });

  it('the client closes its POST mid-call (2026-07-28): the phone is told, everything is freed', async () => {
    const ac = new AbortController();
    const before = { n: calls('sleep'), c: control.cancellations };
    const p = fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-api-key': token,
        'mcp-protocol-version': V,
        'mcp-method': 'tools/call',
        'mcp-name': 'sleep',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'sleep', arguments: { ms: 2500 }, _meta: meta },
      }),
      signal: ac.signal,
    }).catch(() => 'aborted');
    await waitFor(() => calls('sleep') > before.n, 3000, 'sleep on the phone');
    ac.abort();
    expect(await p).toBe('aborted');
    await waitFor(() => control.cancellations > before.c, 3000, 'phone told');
    await waitFor(
      () => JSON.stringify(tables()) === JSON.stringify(empty),
      3000,
      `tables empty: ${JSON.stringify(tables())}`,
    );
  });

  it('notifications/cancelled on B: the phone is told, everything is freed, a late answer is dropped', async () => {
    const h = await session(fast);
    const before = { n: calls('sleep'), c: control.cancellations };
    const p = fetch(nodes.b.mcpUrl, { method: 'POST', headers: h, body: toolCall('c1', 'sleep', { ms: 2500 }) }).then(
      (r) => r.text(),
    );
    await waitFor(() => calls('sleep') > before.n, 3000, 'sleep on the phone');
    const n = await fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c1' } }),
    });
    expect(n.status).toBe(202);
    expect(await p).toMatch(/"cancelled"/);
    await waitFor(() => control.cancellations > before.c, 3000, 'phone told');
    await waitFor(
      () => JSON.stringify(tables()) === JSON.stringify(empty),
      3000,
      `tables empty: ${JSON.stringify(tables())}`,
    );
  });

  it('timed out (3 s) with the phone answering later: timeout, then everything freed', async () => {
    const h = await session(fast);
    const before = calls('blob');
    const t0 = Date.now();
    const r = await fetch(nodes.b.mcpUrl, {
      method: 'POST',
      headers: { ...h, accept: 'application/json' },
      body: toolCall('late', 'blob', { n: 10, ms: 3600 }),
    });
    const j = await r.json();
    expect(j.id).toBe('late');
    expect(j.error?.data?.code).toBe('timeout');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(calls('blob')).toBe(before + 1);
    await new Promise((res) => setTimeout(res, 1000)); // the phone's late answer arrives, and is dropped
    await waitFor(
      () => JSON.stringify(tables()) === JSON.stringify(empty),
      3000,
      `tables empty: ${JSON.stringify(tables())}`,
    );
  });
});

describe.each([false, true])('client ids come back exactly across nodes (fast path: %s)', (fast) => {
  const ids: unknown[] = [
    0,
    -1,
    9007199254740991,
    -9007199254740991,
    // (1.5 and 1e21 are refused at the edge on any node: ids are strings or safe integers, jsonrpc.ts)
    '',
    'plain',
    'quote " and \\ backslash',
    'é unicode ✓',
    '😀 surrogate pair',
    'ctl \u0001 \n',
    '\u2028 line separator',
    '{"id":1}',
  ];
  it.each(ids.map((id) => [JSON.stringify(id), id]))('id %s', async (_name, id) => {
    const h = await session(fast);
    const body = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`;
    const r = await fetch(nodes.b.mcpUrl, { method: 'POST', headers: { ...h, accept: 'application/json' }, body });
    const j = await r.json();
    expect(j.id).toEqual(id);
    expect(j.result?.content?.[0]?.text).toBe('x');
  });
});

describe('progress across nodes', () => {
  it('two sessions on B with the same id and progress token each get only their own progress and answer', async () => {
    const run = async (tag: string) => {
      const h = await openSession(nodes.b.mcpUrl, token);
      const r = await fetch(nodes.b.mcpUrl, {
        method: 'POST',
        headers: h,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 5,
          method: 'tools/call',
          params: { name: 'progress', arguments: { text: tag, n: 20, delayMs: 20 }, _meta: { progressToken: 'p' } },
        }),
      });
      const msgs = [...(await r.text()).matchAll(/data: (\{.*\})\n/g)].map((m) => JSON.parse(m[1]));
      return msgs;
    };
    const [x, y] = await Promise.all([run('x'), run('y')]);
    for (const [msgs, tag] of [
      [x, 'x'],
      [y, 'y'],
    ] as const) {
      const progress = msgs.filter((m) => m.method === 'notifications/progress');
      expect(progress.map((m) => m.params.message)).toEqual(Array.from({ length: 20 }, (_, i) => `${tag} ${i + 1}`));
      expect(progress.every((m) => m.params.progressToken === 'p')).toBe(true);
      expect(msgs.at(-1)).toMatchObject({ id: 5, result: { content: [{ text: `${tag} done` }] } });
    }
    await waitFor(
      () => JSON.stringify(tables()) === JSON.stringify(empty),
      3000,
      `tables empty: ${JSON.stringify(tables())}`,
    );
  });
});
