// The spine, end to end on one node: a real phone, the official SDK client, each revision.
import { describe, expect, it } from 'vitest';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectClient, waitFor } from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';

const echo = useEchoRelay();

describe.each(['2025-11-25', '2025-06-18', '2025-03-26'])('revision %s', (revision) => {
  it('initializes, lists and calls tools, and receives notifications on the GET stream', async () => {
    const { client, transport } = await connectClient(echo.relay.mcpUrl, echo.token, { protocolVersion: revision });
    expect(transport.protocolVersion).toBe(revision);
    expect(transport.sessionId).toBeTruthy();
    expect(client.getServerVersion()?.name).toBe('echo-phone');

    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain('echo');

    const r = await client.callTool({ name: 'echo', arguments: { text: `hello ${revision}` } });
    expect(r.content).toEqual([{ type: 'text', text: `hello ${revision}` }]);

    const got: string[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      got.push(String(n.params.data));
    });
    // The SDK opens its GET stream after initialized; wait until the relay holds it.
    await waitFor(
      () => echo.relay.relay.node.ctx.hub.allStreams().some((l) => l.sessionId === transport.sessionId),
      5000,
      'GET stream',
    );
    await client.callTool({ name: 'notify', arguments: { text: `note ${revision}` } });
    await waitFor(() => got.includes(`note ${revision}`), 5000, 'notification');
    await transport.terminateSession();
    await client.close();
  });
});

it('accepts Authorization: Bearer as well as X-Api-Key', async () => {
  const { client } = await connectClient(echo.relay.mcpUrl, echo.token, { header: 'bearer' });
  const r = await client.callTool({ name: 'echo', arguments: { text: 'bearer' } });
  expect(r.content).toEqual([{ type: 'text', text: 'bearer' }]);
  await client.close();
});

it('never mixes answers between two clients using the same ids (1,000 calls)', async () => {
  const a = await connectClient(echo.relay.mcpUrl, echo.token);
  const b = await connectClient(echo.relay.mcpUrl, echo.token);
  const N = 500;
  const calls: Array<Promise<void>> = [];
  for (let i = 0; i < N; i++) {
    for (const [who, c] of [
      ['A', a.client],
      ['B', b.client],
    ] as const) {
      calls.push(
        c.callTool({ name: 'echo', arguments: { text: `${who}-${i}` } }).then((r) => {
          expect(r.content).toEqual([{ type: 'text', text: `${who}-${i}` }]);
        }),
      );
    }
  }
  await Promise.all(calls);
  expect(calls).toHaveLength(1000);
  await a.client.close();
  await b.client.close();
});
