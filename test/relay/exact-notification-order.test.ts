// A client notification answered 202 before the client's next request: the phone should see the
// notification first (one client, one session, sequential POSTs).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoNodes, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession, post } from '../helpers/raw-mcp.ts';

const N = 200;

describe('order of a client notification and the request after it, two nodes', () => {
  let env: RawEnv & { t: any };
  let stop: () => void;
  beforeAll(async () => {
    env = await twoNodes();
    let seen = env.rawFrames.length;
    const t = setInterval(() => {
      for (; seen < env.rawFrames.length; seen++) {
        const f = JSON.parse(env.rawFrames[seen]);
        if (f.method === 'tools/call')
          env.s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: f.id, result: { content: [] } }));
      }
    }, 2);
    stop = () => clearInterval(t);
  });
  afterAll(async () => {
    stop?.();
    await env?.stop();
  });

  it('the phone receives a notification (answered 202) before the request the client sent after the 202', async () => {
    const h = { ...(await openSession(env.clientNode.mcpUrl, env.token)), accept: 'application/json' };
    await post(
      env.clientNode.mcpUrl,
      h,
      '{"jsonrpc":"2.0","id":"warm","method":"tools/call","params":{"name":"echo","arguments":{}}}',
    );
    const from = env.rawFrames.length;
    for (let i = 0; i < N; i++) {
      const n = await post(
        env.clientNode.mcpUrl,
        h,
        `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"i":${i}}}`,
      );
      expect(n.status).toBe(202);
      await post(
        env.clientNode.mcpUrl,
        h,
        `{"jsonrpc":"2.0","id":${i},"method":"tools/call","params":{"name":"echo","arguments":{"i":${i}}}}`,
      );
    }
    await new Promise((r) => setTimeout(r, 300));
    const order = env.rawFrames
      .slice(from)
      .map((r) => JSON.parse(r))
      .filter((f) => f.method === 'notifications/roots/list_changed' || f.method === 'tools/call')
      .map((f) => (f.method === 'tools/call' ? `call ${f.params.arguments.i}` : `note ${f.params.i}`));
    const expected = Array.from({ length: N }, (_, i) => [`note ${i}`, `call ${i}`]).flat();
    const overtaken = expected.filter(
      (x, k) => x.startsWith('note') && order.indexOf(x) > order.indexOf(expected[k + 1]),
    );
    expect(
      overtaken,
      'notifications acknowledged 202 that reached the phone after the request the client sent once it had the 202',
    ).toEqual([]);
    expect(order).toEqual(expected);
  });
});
