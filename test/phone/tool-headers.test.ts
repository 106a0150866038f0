// Timeouts and tool headers (SEP-2243, revision 2026-07-28) between a client, the relay and a
// phone. wait_for_events keeps its published `timeout_s` (a number: fractions of a second
// allowed), which a tool header cannot carry, so the relay sizes that from the body on both
// revisions; its `timeout_ms` (whole milliseconds, surface 2026.12.03) is declared as the tool
// header `Timeout-Ms`. A tool that declares an integer `Timeout` header (here a small phone of the
// test's own) gets its timeout from `Mcp-Param-Timeout`, checked against the body first
// (docs/decisions/0181-tool-headers.md, 0184-timeout-s-stays-a-number.md, 0212-timeout-ms-tool-header.md).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
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
let sleeper: TestPhone;
let token: string;
let sleeperToken: string;

/** A phone with one tool that sleeps `seconds`, declared as the tool header `Timeout`. */
function sleeperServer(): McpServer {
  const mcp = new McpServer({ name: 'sleeper', version: '1' });
  mcp.registerTool(
    'sleep',
    {
      description: 'Sleeps, then answers',
      inputSchema: { seconds: z.number().int().min(0).max(60).meta({ 'x-mcp-header': 'Timeout' }) },
      annotations: { readOnlyHint: true },
      _meta: { 'phonebridge/scope': 'devices:read' },
    },
    async ({ seconds }) => {
      await new Promise((r) => setTimeout(r, seconds * 1000));
      return { content: [{ type: 'text', text: `slept ${seconds}` }] };
    },
  );
  return mcp;
}

beforeAll(async () => {
  relay = await startTestRelay(['--request-timeout-ms', String(RELAY_TIMEOUT_MS)]);
  const sim = new SimPhone({ seed: 5 });
  phone = await startTestPhone(relay, () => createPhoneServer({ phone: sim, deviceId: 'sim' }));
  sleeper = await startTestPhone(relay, sleeperServer, { name: 'sleeper' });
  token = (await relay.key(phone.deviceId)).token;
  sleeperToken = (await relay.key(sleeper.deviceId)).token;
});
afterAll(async () => {
  await phone?.stop();
  await sleeper?.stop();
  await relay?.stop();
});

async function stateless(
  method: string,
  params: Record<string, unknown>,
  headers: Record<string, string> = {},
  key = token,
) {
  const r = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      'x-api-key': key,
      'mcp-protocol-version': V,
      'mcp-method': method,
      ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : {}),
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: { ...params, _meta: meta } }),
  });
  const text = await r.text();
  const json = JSON.parse(text.startsWith('{') ? text : text.split('data: ').at(-1)!) as {
    result?: {
      structuredContent?: Record<string, unknown>;
      content?: Array<{ text?: string }>;
      tools?: Array<{ name: string; inputSchema: any }>;
    };
    error?: { code: number; message: string };
  };
  return { status: r.status, json };
}

describe('wait_for_events: timeout_s as published, sized from the body', () => {
  it('lists timeout_s as a number with no tool header (a header cannot carry a number)', async () => {
    const { json } = await stateless('tools/list', {});
    const schema = json.result!.tools!.find((t) => t.name === 'wait_for_events')!.inputSchema;
    expect(schema.properties.timeout_s).toMatchObject({ type: 'number', minimum: 0, maximum: 600, default: 30 });
    expect(schema.properties.timeout_s).not.toHaveProperty('x-mcp-header');
  });

  it('accepts fractional seconds and sizes the relay timeout from them: a 1.5 s wait outlives the 1 s default', async () => {
    const started = Date.now();
    const { status, json } = await stateless('tools/call', { name: 'wait_for_events', arguments: { timeout_s: 1.5 } });
    expect(status).toBe(200);
    expect(json.result?.structuredContent).toMatchObject({ events: [], timedOut: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  }, 20_000);

  it('on a session revision (no tool headers) the body sizes the timeout too', async () => {
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

describe('wait_for_events: timeout_ms, declared as the tool header Timeout-Ms', () => {
  it('lists timeout_ms as an integer of milliseconds with the header Timeout-Ms', async () => {
    const { json } = await stateless('tools/list', {});
    const schema = json.result!.tools!.find((t) => t.name === 'wait_for_events')!.inputSchema;
    expect(schema.properties.timeout_ms).toMatchObject({
      type: 'integer',
      minimum: 0,
      maximum: 600_000,
      'x-mcp-header': 'Timeout-Ms',
    });
    expect(schema.required ?? []).not.toContain('timeout_ms');
  });

  it('sizes the relay timeout from Mcp-Param-Timeout-Ms: a 1.5 s wait outlives the 1 s default', async () => {
    const started = Date.now();
    const { status, json } = await stateless(
      'tools/call',
      { name: 'wait_for_events', arguments: { timeout_ms: 1500 } },
      { 'mcp-param-timeout-ms': '1500' },
    );
    expect(status).toBe(200);
    expect(json.result?.structuredContent).toMatchObject({ events: [], timedOut: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  }, 20_000);

  it('refuses timeout_ms without its header, or with a header that disagrees, before the phone sees it', async () => {
    const missing = await stateless('tools/call', { name: 'wait_for_events', arguments: { timeout_ms: 10 } });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ code: -32020 });
    expect(missing.json.error!.message).toContain('Mcp-Param-Timeout-Ms header is required');
    const mismatch = await stateless(
      'tools/call',
      { name: 'wait_for_events', arguments: { timeout_ms: 10 } },
      { 'mcp-param-timeout-ms': '600000' },
    );
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.error!.message).toContain('Mcp-Param-Timeout-Ms');
  });

  it('the phone refuses timeout_s and timeout_ms together: one wait, one unit', async () => {
    const { status, json } = await stateless(
      'tools/call',
      { name: 'wait_for_events', arguments: { timeout_s: 0, timeout_ms: 0 } },
      { 'mcp-param-timeout-ms': '0' },
    );
    expect(status).toBe(200);
    expect(JSON.parse(json.result!.content![0].text!)).toMatchObject({ error: { code: 'invalid_arguments' } });
  });

  it("on a session revision (no tool headers) the body's timeout_ms sizes the timeout", async () => {
    const { client } = await connectClient(relay.mcpUrl, token);
    try {
      const call = caller(client);
      await client.listTools();
      const started = Date.now();
      expect(ok(await call('wait_for_events', { timeout_ms: 1800 }))).toMatchObject({ timedOut: true });
      expect(Date.now() - started).toBeGreaterThanOrEqual(1700);
    } finally {
      await client.close();
    }
  }, 20_000);
});

describe('a tool that declares its timeout as the tool header Timeout', () => {
  it('gets its relay timeout from Mcp-Param-Timeout: a 3 s sleep outlives the 1 s default', async () => {
    const started = Date.now();
    const { status, json } = await stateless(
      'tools/call',
      { name: 'sleep', arguments: { seconds: 3 } },
      { 'mcp-param-timeout': '3' },
      sleeperToken,
    );
    expect(status).toBe(200);
    expect(json.result?.content?.[0]?.text).toBe('slept 3');
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
  }, 20_000);

  it('refuses a header that disagrees with the body, and a body value without its header', async () => {
    const mismatch = await stateless(
      'tools/call',
      { name: 'sleep', arguments: { seconds: 0 } },
      { 'mcp-param-timeout': '5' },
      sleeperToken,
    );
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.error).toMatchObject({ code: -32020 });
    expect(mismatch.json.error!.message).toContain('Mcp-Param-Timeout');
    const missing = await stateless('tools/call', { name: 'sleep', arguments: { seconds: 0 } }, {}, sleeperToken);
    expect(missing.status).toBe(400);
    expect(missing.json.error!.message).toContain('Mcp-Param-Timeout header is required');
  }, 60_000);
});
