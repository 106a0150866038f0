// Tool headers (SEP-2243, revision 2026-07-28) between a client, the relay and the reference
// phone: wait_for_events declares its timeout as `Mcp-Param-Timeout`; the relay checks the
// header against the body, sizes the call's timeout from it, and the session revisions (no
// tool headers) keep working from the body (docs/decisions/0181-tool-headers.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPhoneServer } from '../../src/device/tools/index.ts';
import { connectClient, startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { caller, ok, SimPhone } from './helpers.ts';

const V = '2026-07-28';
const meta = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
// The relay's own timeout is shorter than the waits below: only a timeout sized from the
// request lets them finish.
const RELAY_TIMEOUT_MS = 1000;

let relay: TestRelay;
let phone: TestPhone;
let token: string;
beforeAll(async () => {
  relay = await startTestRelay(['--request-timeout-ms', String(RELAY_TIMEOUT_MS)]);
  const sim = new SimPhone({ seed: 5 });
  phone = await startTestPhone(relay, () => createPhoneServer({ phone: sim, deviceId: 'sim' }));
  token = (await relay.key(phone.deviceId)).token;
});
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
});

async function stateless(method: string, params: Record<string, unknown>, headers: Record<string, string> = {}) {
  const r = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      'x-api-key': token,
      'mcp-protocol-version': V,
      'mcp-method': method,
      ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : {}),
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: { ...params, _meta: meta } }),
  });
  const text = await r.text();
  const json = JSON.parse(text.startsWith('{') ? text : text.split('data: ').at(-1)!) as {
    result?: { structuredContent?: Record<string, unknown>; tools?: Array<{ name: string; inputSchema: any }> };
    error?: { code: number; message: string };
  };
  return { status: r.status, json };
}

describe('wait_for_events timeout as a tool header', () => {
  it('is declared on the listed tool as an integer parameter', async () => {
    const { json } = await stateless('tools/list', {});
    const schema = json.result!.tools!.find((t) => t.name === 'wait_for_events')!.inputSchema;
    expect(schema.properties.timeout_s).toMatchObject({ type: 'integer', 'x-mcp-header': 'Timeout' });
  });

  it('sizes the relay timeout from the header: a 3 s wait outlives the relay default of 1 s', async () => {
    const started = Date.now();
    const { status, json } = await stateless(
      'tools/call',
      { name: 'wait_for_events', arguments: { timeout_s: 3 } },
      { 'mcp-param-timeout': '3' },
    );
    expect(status).toBe(200);
    expect(json.result?.structuredContent).toMatchObject({ events: [], timedOut: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
  }, 20_000);

  it('refuses a header that disagrees with the body, and a body value without its header', async () => {
    const mismatch = await stateless(
      'tools/call',
      { name: 'wait_for_events', arguments: { timeout_s: 0 } },
      { 'mcp-param-timeout': '5' },
    );
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.error).toMatchObject({ code: -32020 });
    expect(mismatch.json.error!.message).toContain('Mcp-Param-Timeout');
    const missing = await stateless('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 0 } });
    expect(missing.status).toBe(400);
    expect(missing.json.error!.message).toContain('Mcp-Param-Timeout header is required');
    // Absent from the body (its default applies at the phone): no header expected.
    const absent = await stateless('tools/call', { name: 'wait_for_events', arguments: { cursor: 0 } });
    expect(absent.status).toBe(200);
  }, 60_000);

  it('on a session revision (no tool headers) the body still sizes the timeout', async () => {
    const { client } = await connectClient(relay.mcpUrl, token);
    try {
      const call = caller(client);
      await client.listTools();
      const started = Date.now();
      expect(ok(await call('wait_for_events', { timeout_s: 2 }))).toMatchObject({ timedOut: true });
      expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    } finally {
      await client.close();
    }
  }, 20_000);
});
