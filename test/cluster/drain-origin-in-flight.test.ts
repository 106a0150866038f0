// A draining ORIGIN node: its client's tools/call went over the bus to the phone's node (which
// stays up) and is still running when --drain-ms ends. The client gets an error answer before
// the node exits (docs/OPERATIONS.md, "Node lifecycle and failures": at --drain-ms what is left
// fails), not its connection closed under it with no answer; the call is cancelled at the phone.
import { afterAll, expect, it } from 'vitest';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { startTestPhone, waitFor, type TestPhone } from '../helpers/relay.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { openSession } from '../helpers/raw-mcp.ts';

let t: TwoNodes | undefined;
let phone: TestPhone | undefined;
afterAll(async () => {
  await phone?.stop();
  await t?.stop();
}, 30_000);

it('a cross-node call still running when the origin node reaches --drain-ms gets an error answer, not a dropped connection', async () => {
  t = await startTwoNodes(['--drain-ms', '1500']);
  phone = await startTestPhone(t.a, () => createEchoServer());
  const token = (await t.a.key(phone.deviceId)).token;
  // A client of node b (JSON answers only: no SSE stream to resume) calling the phone on a.
  const h = { ...(await openSession(t.b.mcpUrl, token)), accept: 'application/json' };
  const answer = fetch(t.b.mcpUrl, {
    method: 'POST',
    headers: h,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'sleep', arguments: { ms: 8000 } },
    }),
  }).then(
    async (r) => ({ status: r.status, body: await r.text() }),
    (err: Error) => ({ status: 0, body: `no answer: ${String(err)} (${String(err.cause)})` }),
  );
  await new Promise((r) => setTimeout(r, 500));
  // What `phonebridge serve` does on SIGTERM (services/serve.ts shutdown): drain, then stop.
  await t.b.relay.node.drain();
  await t.b.relay.stop();
  const got = await answer;
  expect(got.status, `the client's request: ${got.body}`).toBe(200);
  expect(JSON.parse(got.body)).toMatchObject({
    jsonrpc: '2.0',
    id: 1,
    error: { code: -31004, data: { code: 'relay_unavailable' } },
  });
  // Cancelled at the phone, which would otherwise sleep on for seconds with nobody to answer.
  await waitFor(() => t!.a.relay.node.ctx.hub.device(phone!.deviceId)?.inFlight === 0, 3_000, 'the call cancelled');
}, 60_000);
