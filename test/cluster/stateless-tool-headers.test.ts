// A 2026-07-28 tools/call answered alike by every node: the check that a tool's declared
// `Mcp-Param-*` headers equal its arguments (400 / -32020), and the sizing of its timeout from a
// declared `Mcp-Param-Timeout`, need the phone's tool catalog, which only the node holding the
// phone has. A node without it passes the headers on with the request (the bus `req` header's
// `ph`: src/gateway/node-messages.ts), and the node holding the phone checks and sizes the call
// before the phone sees it (src/gateway/tool-header-check.ts); the refusal comes back through the
// cross-node `fail` and is answered 400 (src/gateway/mcp-stateless.ts). docs/PROTOCOL.md
// ("Revision 2026-07-28 (stateless)", "Timeouts"); MCP SEP-2243, quoted in
// docs/decisions/0181-tool-headers.md: "any server that processes the message body MUST
// validate" that the header equals the argument. No stickiness: the load balancer may pick any
// node, so each case runs on both.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startTestPhone, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';

const V = '2026-07-28';
// Shorter than the sleeps below: only a timeout sized from the request lets them finish.
const RELAY_TIMEOUT_MS = 1000;
const SCOPE = { 'phonebridge/scope': 'devices:read' };

/** A phone whose tools declare tool headers: `Region` (a string), `Timeout` (whole seconds). */
function headersServer(): McpServer {
  const mcp = new McpServer({ name: 'tool-headers', version: '1' });
  const nap = (s: number) => new Promise((r) => setTimeout(r, s * 1000));
  mcp.registerTool(
    'where',
    {
      description: 'Echoes the region, which travels as Mcp-Param-Region',
      inputSchema: { region: z.string().optional().meta({ 'x-mcp-header': 'Region' }) },
      annotations: { readOnlyHint: true },
      _meta: SCOPE,
    },
    ({ region }) => ({ content: [{ type: 'text', text: `region: ${region}` }] }),
  );
  mcp.registerTool(
    'sleep',
    {
      description: 'Sleeps, then answers; its wait is the tool header Timeout',
      inputSchema: { seconds: z.number().int().min(0).max(60).meta({ 'x-mcp-header': 'Timeout' }) },
      annotations: { readOnlyHint: true },
      _meta: SCOPE,
    },
    async ({ seconds }) => (await nap(seconds), { content: [{ type: 'text', text: `slept ${seconds}` }] }),
  );
  mcp.registerTool(
    'doze',
    {
      description: 'Sleeps, then answers; declares no tool header',
      inputSchema: { seconds: z.number().int().min(0).max(60) },
      annotations: { readOnlyHint: true },
      _meta: SCOPE,
    },
    async ({ seconds }) => (await nap(seconds), { content: [{ type: 'text', text: `dozed ${seconds}` }] }),
  );
  return mcp;
}

let t: TwoNodes;
let phone: TestPhone;
let token: string;

beforeAll(async () => {
  t = await startTwoNodes(['--request-timeout-ms', String(RELAY_TIMEOUT_MS)]);
  phone = await startTestPhone(t.a, headersServer);
  token = (await t.a.key(phone.deviceId)).token;
});
afterAll(async () => {
  await phone?.stop();
  await t?.stop();
});

async function call(
  node: TestRelay,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string>,
  accept = 'application/json, text/event-stream',
) {
  const r = await fetch(node.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept,
      'x-api-key': token,
      'mcp-protocol-version': V,
      'mcp-method': 'tools/call',
      'mcp-name': name,
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: {
        name,
        arguments: args,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': V,
          'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
  const body = await r.text();
  return {
    status: r.status,
    contentType: r.headers.get('content-type'),
    body,
    json: JSON.parse(body) as {
      result?: { content?: Array<{ text?: string }> };
      error?: { code: number; message: string; data?: { code?: string } };
    },
  };
}

const NODES = [
  ['the node holding the phone', () => t.a],
  ['another node', () => t.b],
] as const;

describe.each(NODES)('a 2026-07-28 tools/call with tool headers, on %s', (_, node) => {
  it('a header contradicting its argument is refused 400 / -32020, not forwarded to the phone', async () => {
    const r = await call(node(), 'where', { region: 'us-east' }, { 'mcp-param-region': 'eu-west' });
    expect(r.status, r.body).toBe(400);
    expect(r.contentType).toContain('application/json');
    expect(r.json.error?.code).toBe(-32020);
    expect(r.json.error?.message).toContain('Mcp-Param-Region');
  });

  it('an argument without its header, or a header without its argument, is refused 400 / -32020', async () => {
    const missing = await call(node(), 'where', { region: 'us-east' }, {});
    expect(missing.status, missing.body).toBe(400);
    expect(missing.json.error?.code).toBe(-32020);
    const extra = await call(node(), 'where', {}, { 'mcp-param-region': 'eu-west' });
    expect(extra.status, extra.body).toBe(400);
    expect(extra.json.error?.code).toBe(-32020);
  });

  it('a header equal to its argument reaches the phone', async () => {
    const r = await call(node(), 'where', { region: 'eu-west' }, { 'mcp-param-region': 'eu-west' });
    expect(r.status, r.body).toBe(200);
    expect(r.json.result?.content?.[0]?.text).toBe('region: eu-west');
  });

  it('a declared Mcp-Param-Timeout sizes the call: a 2 s call outlives the 1 s default', async () => {
    const r = await call(node(), 'sleep', { seconds: 2 }, { 'mcp-param-timeout': '2' }, 'application/json');
    expect(r.status, r.body).toBe(200);
    expect(r.json.result?.content?.[0]?.text).toBe('slept 2');
  }, 20_000);

  it('an Mcp-Param-Timeout the tool does not declare sizes nothing: the 1 s default times the call out', async () => {
    const started = Date.now();
    const r = await call(node(), 'doze', { seconds: 3 }, { 'mcp-param-timeout': '30' }, 'application/json');
    expect(r.json.error?.data?.code, r.body).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(2500);
  }, 20_000);
});
