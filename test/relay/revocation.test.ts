// Revocation ends what the key holds open: after a key is revoked (or its device removed, or
// its account locked) its GET streams, its subscriptions/listen streams and its calls in
// flight end on every node — the phone is told the calls are cancelled — while another key's
// stream on the same phone carries on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { getStream, listenStream, openSession, post, toolCall } from '../helpers/raw-mcp.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';

interface Setup {
  phoneNode: TestRelay;
  clientNode: TestRelay;
  phone: TestPhone;
  control: EchoServerControl;
}

async function whatTheKeyHolds(s: Setup, scopes?: Parameters<TestRelay['key']>[1]) {
  const key = await s.phoneNode.key(s.phone.deviceId, scopes);
  const mcp = s.clientNode.mcpUrl;
  const session = await openSession(mcp, key.token);
  const get = await getStream(mcp, session);
  const listen = await listenStream(mcp, key.token);
  expect([get.status, listen.status]).toEqual([200, 200]);
  const before = s.control.calls.length;
  const call = post(mcp, session, toolCall(7, 'sleep', { ms: 20_000 }));
  await waitFor(() => s.control.calls.length > before, 5000, 'the slow call reached the phone');
  return { key, session, get, listen, call };
}

function revocationSuite(name: string, setup: () => Promise<Setup>, teardown: () => Promise<void>) {
  describe(name, () => {
    let s: Setup;
    beforeAll(async () => {
      s = await setup();
    });
    afterAll(teardown);

    it('keys revoke ends the key’s GET and listen streams and cancels its call at the phone; another key carries on', async () => {
      const victim = await whatTheKeyHolds(s);
      const other = await s.phoneNode.key(s.phone.deviceId);
      const otherSession = await openSession(s.clientNode.mcpUrl, other.token);
      const otherGet = await getStream(s.clientNode.mcpUrl, otherSession);
      const cancelledBefore = s.control.cancellations;

      expect(await s.phoneNode.relay.store.store.revokeToken(victim.key.id)).toBe(true);

      const answer = await victim.call;
      expect(answer.json?.error?.data?.code).toBe('cancelled');
      await Promise.race([
        Promise.all([victim.get.ended, victim.listen.ended]),
        new Promise((_, reject) => setTimeout(() => reject(new Error('streams still open after revoke')), 5000)),
      ]);
      await waitFor(() => s.control.cancellations > cancelledBefore, 5000, 'the phone heard the cancellation');
      expect((await post(s.clientNode.mcpUrl, victim.session, toolCall(8, 'echo', { text: 'x' }))).status).toBe(401);

      // The other key's stream is untouched and still hears the phone.
      expect(otherGet.isEnded()).toBe(false);
      const r = await post(s.clientNode.mcpUrl, otherSession, toolCall(9, 'notify', { text: 'still here' }));
      expect(r.json.result).toBeDefined();
      await waitFor(() => otherGet.text().includes('still here'), 5000, 'the other key heard the phone');
      otherGet.abort();
    });

    it('locking the account ends its streams and calls on every node', async () => {
      const victim = await whatTheKeyHolds(s);
      await s.phoneNode.relay.store.store.setAccountLocked(await accountOf(s, victim.key.id), true);
      try {
        expect((await victim.call).json?.error?.data?.code).toBe('cancelled');
        await Promise.race([
          Promise.all([victim.get.ended, victim.listen.ended]),
          new Promise((_, reject) => setTimeout(() => reject(new Error('streams still open after lock')), 5000)),
        ]);
      } finally {
        await s.phoneNode.relay.store.store.setAccountLocked(await accountOf(s, victim.key.id), false);
      }
    });
  });
}

describe('device removal', () => {
  it('ends every stream and call of the device’s keys, on the node of the client too', async () => {
    const nodes = await startTwoNodes();
    const control: EchoServerControl = { calls: [], cancellations: 0 };
    try {
      const phone = await startTestPhone(nodes.a, () => createEchoServer(control));
      const s: Setup = { phoneNode: nodes.a, clientNode: nodes.b, phone, control };
      const victim = await whatTheKeyHolds(s);
      expect(await nodes.a.relay.store.store.removeDevice(phone.deviceId)).toBe(true);
      // The same answer whichever node learns of the removal first: the phone's (its socket
      // closed 4004) or the client's (the removal on the bus).
      expect((await victim.call).json?.error?.data?.code).toBe('device_removed');
      await Promise.race([
        Promise.all([victim.get.ended, victim.listen.ended]),
        new Promise((_, reject) => setTimeout(() => reject(new Error('streams still open after removal')), 5000)),
      ]);
      await phone.stop();
    } finally {
      await nodes.stop();
    }
  });

  it('answers device_removed when the client’s node learns of the removal before the phone’s node answers', async () => {
    const nodes = await startTwoNodes();
    const control: EchoServerControl = { calls: [], cancellations: 0 };
    try {
      const phone = await startTestPhone(nodes.a, () => createEchoServer(control));
      const victim = await whatTheKeyHolds({ phoneNode: nodes.a, clientNode: nodes.b, phone, control });
      // What the client's node does with the removal on the bus (src/gateway/node.ts, applyControl),
      // here before the phone's node has closed the socket: the order the race sometimes takes.
      nodes.b.relay.node.ctx.hub.revoke({ deviceId: phone.deviceId }, 'device_removed');
      expect((await victim.call).json?.error?.data?.code).toBe('device_removed');
      await phone.stop();
    } finally {
      await nodes.stop();
    }
  });
});

async function accountOf(s: Setup, tokenId: string): Promise<string> {
  const t = (await s.phoneNode.relay.store.store.listTokens()).find((x) => x.id === tokenId);
  if (!t) throw new Error('no such token');
  return t.accountId;
}

let single: { relay: TestRelay; phone: TestPhone } | undefined;
revocationSuite(
  'one node',
  async () => {
    const control: EchoServerControl = { calls: [], cancellations: 0 };
    const relay = await startTestRelay();
    const phone = await startTestPhone(relay, () => createEchoServer(control));
    single = { relay, phone };
    return { phoneNode: relay, clientNode: relay, phone, control };
  },
  async () => {
    await single?.phone.stop();
    await single?.relay.stop();
  },
);

let pair: { nodes: TwoNodes; phone: TestPhone } | undefined;
revocationSuite(
  'two nodes over Redis (phone on one, client on the other)',
  async () => {
    const control: EchoServerControl = { calls: [], cancellations: 0 };
    const nodes = await startTwoNodes();
    const phone = await startTestPhone(nodes.a, () => createEchoServer(control));
    pair = { nodes, phone };
    return { phoneNode: nodes.a, clientNode: nodes.b, phone, control };
  },
  async () => {
    await pair?.phone.stop();
    await pair?.nodes.stop();
  },
);
