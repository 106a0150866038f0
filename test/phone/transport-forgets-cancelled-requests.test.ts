// The phone's WebSocketTransport remembers every incoming request in `openRequests` (id -> method)
// and forgets it when a response is sent, when the relay cancels it, or when the socket closes. A
// request the relay cancelled (notifications/cancelled: a client's cancel, a 2026-07-28 stream
// closed, or every relay timeout) is never answered (MCP forbids it); before the transport forgot
// it on the cancel, its entry stayed for the socket's life, and on a phone that stays connected
// for days the map grew with every cancelled call.
//
// Promises checked:
// - src/device/agent/ws-transport.ts: "openRequests: Incoming request id → method, to shape an
//   oversized response" — i.e. only requests still open; a cancelled one is not.
// - docs/PROTOCOL.md "Timeouts": "On timeout the client gets the `timeout` error, the phone gets
//   `notifications/cancelled`, and a late answer is dropped." — the phone never answers those ids.
// - Brief: no leaks on the phone side (long-lived sockets are the normal case: pings keep them
//   open for hours, docs/PROTOCOL.md "Liveness").
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  connectClient,
  startTestPhone,
  startTestRelay,
  waitFor,
  type TestPhone,
  type TestRelay,
} from '../helpers/relay.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';

let relay: TestRelay;
let phone: TestPhone;
let token: string;
const control = { calls: [], cancellations: 0 } as unknown as EchoServerControl;
const transports: Transport[] = [];

beforeAll(async () => {
  relay = await startTestRelay();
  phone = await startTestPhone(relay, () => {
    const server = createEchoServer(control);
    // The real server, handed the agent's real transport; kept here only to look at afterwards.
    return {
      connect: (t: Transport) => {
        transports.push(t);
        return server.connect(t);
      },
      close: () => server.close(),
    };
  });
  token = (await relay.key(phone.deviceId)).token;
}, 60_000);
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
});

it('a request the relay cancelled is no longer held as open by the phone transport', async () => {
  const { client } = await connectClient(relay.mcpUrl, token);
  const N = 10;
  for (let i = 0; i < N; i++) {
    const abort = new AbortController();
    const before = control.calls.length;
    const call = client.callTool({ name: 'sleep', arguments: { ms: 60_000 } }, undefined, { signal: abort.signal });
    await waitFor(() => control.calls.length > before, 10_000, 'the call to reach the phone');
    const cancelledBefore = control.cancellations;
    abort.abort('gave up');
    await call.catch(() => {});
    await waitFor(() => control.cancellations > cancelledBefore, 10_000, 'the cancellation to reach the phone');
  }
  // A request that completes normally is removed; show the map works for answered calls.
  await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
  await client.close();

  const transport = transports.at(-1) as unknown as { openRequests: Map<unknown, string> };
  expect(transport.openRequests, 'the phone transport is still holding the cancelled requests').toBeInstanceOf(Map);
  expect([...transport.openRequests.entries()]).toEqual([]);
}, 60_000);
