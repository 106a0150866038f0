// Per-credential quotas on one phone: a key's share of --max-in-flight, the batch length, the
// concurrent wait_for_events per key, and abandoned calls that count against nobody's share.
// Each on one node and with the phone on one node and the client on the other (Redis).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startTestPhone, startTestRelay, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { baseHeaders, openSession, post, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';

interface Setup {
  phoneNode: TestRelay;
  clientNode: TestRelay;
  phone: TestPhone;
  control: EchoServerControl;
}

/** The echo phone plus a wait_for_events that waits timeout_s (or until cancelled). */
function phoneServer(control: EchoServerControl) {
  const server = createEchoServer(control);
  server.registerTool(
    'wait_for_events',
    {
      description: 'Waits for events',
      inputSchema: { timeout_s: z.number() },
      _meta: { 'phonebridge/scope': 'devices:read' },
    },
    async (args, extra) => {
      control.calls.push({ name: 'wait_for_events', args, meta: extra._meta });
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, args.timeout_s * 1000);
        extra.signal.addEventListener('abort', () => {
          control.cancellations++;
          clearTimeout(t);
          resolve();
        });
      });
      return { content: [{ type: 'text', text: 'no events' }] };
    },
  );
  return server;
}

async function setupOn(flags: string[], twoNodes: boolean): Promise<Setup & { stop(): Promise<void> }> {
  const control: EchoServerControl = { calls: [], cancellations: 0 };
  let nodes: TwoNodes | undefined;
  let single: TestRelay | undefined;
  if (twoNodes) nodes = await startTwoNodes(flags);
  else single = await startTestRelay(flags);
  const phoneNode = nodes?.a ?? single!;
  const phone = await startTestPhone(phoneNode, () => phoneServer(control));
  return {
    phoneNode,
    clientNode: nodes?.b ?? single!,
    phone,
    control,
    async stop() {
      await phone.stop();
      await (nodes ? nodes.stop() : single!.stop());
    },
  };
}

/** The one revision that allows JSON-RPC batches. */
const BATCH_REVISION = '2025-03-26';

const batchOf = (from: number, n: number, name: string, args: Record<string, unknown>) =>
  `[${Array.from({ length: n }, (_, i) => toolCall(from + i, name, args)).join(',')}]`;

/** Waits until the phone has stopped receiving new calls for a moment. */
async function settled(control: EchoServerControl): Promise<void> {
  let last = -1;
  await waitFor(
    async () => {
      const now = control.calls.length;
      const still = now === last;
      last = now;
      await new Promise((r) => setTimeout(r, 150));
      return still;
    },
    20_000,
    'calls to settle',
  );
}

function quotaSuite(name: string, twoNodes: boolean) {
  describe(`${name}: defaults`, () => {
    let s: Awaited<ReturnType<typeof setupOn>>;
    beforeAll(async () => {
      s = await setupOn([], twoNodes);
    });
    afterAll(() => s?.stop());

    it('a 2,100-item batch is refused with a clear error and reaches nothing', async () => {
      const a = await s.phoneNode.key(s.phone.deviceId, ['devices:lease']);
      const session = await openSession(s.clientNode.mcpUrl, a.token, BATCH_REVISION);
      const before = s.control.calls.length;
      const r = await post(s.clientNode.mcpUrl, session, batchOf(1, 2100, 'sleep', { ms: 1 }));
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ code: -32600 });
      expect(r.json.error.message).toContain('at most 128');
      expect(s.control.calls.length).toBe(before);
    });

    it('one key’s 2,100 calls leave another key its share: its call is answered, not device_busy', async () => {
      const a = await s.phoneNode.key(s.phone.deviceId);
      const b = await s.phoneNode.key(s.phone.deviceId);
      const sa = await openSession(s.clientNode.mcpUrl, a.token, BATCH_REVISION);
      const sb = await openSession(s.clientNode.mcpUrl, b.token);
      const flood = Array.from({ length: 17 }, (_, i) =>
        post(s.clientNode.mcpUrl, sa, batchOf(1000 * (i + 1), 124, 'sleep', { ms: 6000 })),
      );
      await waitFor(() => s.control.calls.length >= 1000, 20_000, 'the flood reached the phone');
      await settled(s.control);
      const r = await post(s.clientNode.mcpUrl, sb, toolCall(1, 'echo', { text: 'mine' }));
      expect(r.json.result?.content?.[0]?.text).toBe('mine');
      const answers = (await Promise.all(flood)).flatMap((x) => x.json as any[]);
      expect(answers).toHaveLength(2108);
      // Counted by outcome and message, so a failure names the limit that refused them.
      const byOutcome: Record<string, number> = {};
      for (const m of answers) {
        const k = m.error
          ? `${m.error.data?.code ?? m.error.code}: ${String(m.error.message).replace(/\d+/g, 'N')}`
          : 'ok';
        byOutcome[k] = (byOutcome[k] ?? 0) + 1;
      }
      // The key's share is half of --max-in-flight: 1,024 run, the rest are refused for this key.
      expect(byOutcome).toEqual({
        ok: 1024,
        'device_busy: Too many requests are in flight for this phone: this key already has N requests in flight on the phone':
          2108 - 1024,
      });
    });

    it('caps concurrent wait_for_events per key; another key still waits', async () => {
      const a = await s.phoneNode.key(s.phone.deviceId);
      const b = await s.phoneNode.key(s.phone.deviceId);
      const sa = await openSession(s.clientNode.mcpUrl, a.token);
      const sb = await openSession(s.clientNode.mcpUrl, b.token);
      const waits = Array.from({ length: 6 }, (_, i) =>
        post(
          s.clientNode.mcpUrl,
          { ...sa, accept: 'application/json' },
          toolCall(i, 'wait_for_events', { timeout_s: 3 }),
        ),
      );
      const answers = await Promise.all(waits);
      const refused = answers.filter((x) => x.json.error?.data?.code === 'device_busy');
      expect(refused).toHaveLength(2);
      expect(refused[0].json.error.message).toContain('wait_for_events');
      const mine = await post(s.clientNode.mcpUrl, sb, toolCall(9, 'wait_for_events', { timeout_s: 0 }));
      expect(mine.json.result).toBeDefined();
    });
  });

  describe(`${name}: abandoned calls`, () => {
    let s: Awaited<ReturnType<typeof setupOn>>;
    beforeAll(async () => {
      s = await setupOn(['--max-in-flight', '8', '--max-orphans', '4'], twoNodes);
    });
    afterAll(() => s?.stop());

    it('orphans count against nobody’s share and are bounded per phone (oldest cancelled at the phone)', async () => {
      const a = await s.phoneNode.key(s.phone.deviceId);
      const b = await s.phoneNode.key(s.phone.deviceId);
      const sa = { ...(await openSession(s.clientNode.mcpUrl, a.token)), accept: 'application/json' };
      const sb = await openSession(s.clientNode.mcpUrl, b.token);
      const before = s.control.calls.length;
      const cancelledBefore = s.control.cancellations;
      const gone = Array.from({ length: 8 }, (_, i) => {
        const ctl = new AbortController();
        const p = fetch(s.clientNode.mcpUrl, {
          method: 'POST',
          headers: sa,
          body: toolCall(i, 'sleep', { ms: 8000 }),
          signal: ctl.signal,
        }).catch(() => undefined);
        return { ctl, p };
      });
      await waitFor(() => s.control.calls.length >= before + 8, 10_000, 'the calls reached the phone');
      for (const g of gone) g.ctl.abort();
      await Promise.all(gone.map((g) => g.p));
      // Beyond --max-orphans the oldest are cancelled at the phone; the rest run on.
      await waitFor(() => s.control.cancellations >= cancelledBefore + 4, 10_000, 'oldest orphans cancelled');
      const conn = s.phoneNode.relay.node.ctx.hub.device(s.phone.deviceId)!;
      expect(conn.orphaned).toBe(4);
      expect(conn.inFlightOf(a.id)).toBe(0);
      // The phone is not locked: another key (and the same key) are answered.
      const r = await post(s.clientNode.mcpUrl, sb, toolCall(20, 'echo', { text: 'free' }));
      expect(r.json.result?.content?.[0]?.text).toBe('free');
      const again = await post(s.clientNode.mcpUrl, baseHeaders(a.token), toolCall(21, 'echo', { text: 'x' }));
      expect(again.status).toBe(400); // no session header: it only shows the key still authenticates
      expect(s.control.cancellations).toBe(cancelledBefore + 4);
    });
  });
}

quotaSuite('one node', false);
quotaSuite('two nodes over Redis', true);
