// docs/OPERATIONS.md "Traces": "A failed request's span has status ERROR and `error.type`: the
// relay's error name (`device_offline`, `timeout`, `insufficient_scope`, …), else the JSON-RPC
// error code … No span holds a token, pairing code, key, argument, result, resource URI or error
// message." docs/decisions/0110-tracing-off-by-default-explicit-context.md: "Nothing of a call's
// content in a span … the status description is the error's name."
// An error answer from the phone (its tool, or the bridge's upstream) can carry any string in
// `data.code` (here the call's argument, echoed back); only the relay's own error names
// (src/protocol/errors.ts) are taken as a name, so the SERVER and CLIENT spans say -32000, and
// so does the reference phone's own span of the call.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { openSession, post } from '../helpers/raw-mcp.ts';
import { startTraced, waitFor, type Traced } from '../helpers/traced-relay.ts';
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { phoneTracingFromEnv, tracedTransport } from '../../src/device/agent/tracing.ts';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

let t: Traced;
beforeAll(async () => {
  t = await startTraced('node-errcode');
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

it("a phone's error answer puts neither its data nor the call's argument into error.type or the status", async () => {
  const marker = `ARG${randomBytes(6).toString('hex')}`;
  // A tool that fails and echoes what it was given in its error data (as many do).
  t.phone.ws.on('message', (d) => {
    const f = JSON.parse((d as Buffer).toString('utf8'));
    if (f.method === 'tools/call')
      t.phone.ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: f.id,
          error: { code: -32000, message: 'tool failed', data: { code: f.params.arguments.text } },
        }),
      );
  });
  const headers = await openSession(t.relay.mcpUrl, t.token);
  const r = await post(
    t.relay.mcpUrl,
    headers,
    JSON.stringify({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: marker } },
    }),
  );
  expect(r.json.error.code).toBe(-32000);
  const failed = () => t.receiver.spans.filter((s) => s.attributes['rpc.response.status_code'] === '-32000');
  await waitFor(() => failed().length >= 2, 10_000, 'the SERVER and CLIENT spans of the failed call');
  for (const s of failed()) {
    expect(s.status.code).toBe(2);
    // Not the relay's error name, so the JSON-RPC code.
    expect(s.attributes['error.type']).toBe('-32000');
    expect(s.status.message).toBe('-32000');
  }
  for (const body of t.receiver.bodies) expect(body.includes(marker)).toBe(false);
});

it("the reference phone's own span names such an error by its code too (src/device/agent/tracing.ts)", async () => {
  const receiver = await startOtlpReceiver();
  const tracing = phoneTracingFromEnv('phone-errcode', {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  })!;
  try {
    const inner: Transport = { start: async () => {}, close: async () => {}, send: async () => {} };
    const outer = tracedTransport(inner, tracing);
    outer.onmessage = () => {};
    const marker = `ARG${randomBytes(6).toString('hex')}`;
    inner.onmessage!({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: marker } },
    });
    await outer.send({ jsonrpc: '2.0', id: 1, error: { code: -32000, message: marker, data: { code: marker } } });
    // The phone's own refusal keeps its name (a relay error name under its own code).
    inner.onmessage!({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo' } });
    await outer.send({
      jsonrpc: '2.0',
      id: 2,
      error: { code: -31003, message: 'too large', data: { code: 'too_large' } },
    });
    await tracing.flush();
    await waitFor(() => receiver.spans.length >= 2, 10_000, "the phone's spans");
    expect(receiver.spans.map((s) => [s.attributes['error.type'], s.status.message])).toEqual([
      ['-32000', '-32000'],
      ['too_large', 'too_large'],
    ]);
    for (const body of receiver.bodies) expect(body.includes(marker)).toBe(false);
  } finally {
    await tracing.shutdown();
    await receiver.close();
  }
});
