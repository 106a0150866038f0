// A header of 2026-07-28 sent on several lines is one field, and that field must match the body.
// Spec 2026-07-28, streamable-http "Server Validation": "Servers that process the request body
// MUST reject requests where the values specified in the headers do not match the corresponding
// values in the request body" — so that a load balancer routing on the header and the server
// executing the body cannot disagree. RFC 9110 §5.3: a field sent as several field lines has as
// its value every line's value joined by commas ("tools/call, tools/list"), which matches no
// body value. docs/PROTOCOL.md ("Revision 2026-07-28 (stateless)"): `MCP-Protocol-Version`,
// `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` sent on several lines are compared joined by ", ",
// whichever line an intermediary reads, and refused 400 / -32020.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { perFile, useEchoRelay } from '../helpers/per-file.ts';
import { startTestPhone } from '../helpers/relay.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';
import { rawPost, statelessHeaders, toolCallBody } from '../helpers/raw-header-lines.ts';

const control: EchoServerControl = { calls: [], cancellations: 0 };
const echo = useEchoRelay([], { control });

/** A second phone on the same relay whose tool `where` declares `Mcp-Param-Region`. */
const regionCalls: string[] = [];
const regional = perFile(
  async () => {
    const phone = await startTestPhone(echo.relay, () => {
      const mcp = new McpServer({ name: 'regional', version: '1' });
      mcp.registerTool(
        'where',
        {
          description: 'Echoes the region, which travels as Mcp-Param-Region',
          inputSchema: { region: z.string().optional().meta({ 'x-mcp-header': 'Region' }) },
          _meta: { 'phonebridge/scope': 'devices:read' },
        },
        ({ region }) => (regionCalls.push(String(region)), { content: [{ type: 'text', text: `region: ${region}` }] }),
      );
      return mcp;
    });
    return { phone, token: (await echo.relay.key(phone.deviceId)).token };
  },
  async ({ phone }) => phone.stop(),
);

const port = () => echo.relay.relay.node.port;
const refusal = (r: { status: number; json: any }) => ({
  status: r.status,
  code: r.json?.error?.code,
  id: r.json?.id,
});

describe('2026-07-28 mirrored headers sent on several lines', () => {
  it('serves the same request with each header on one line (the baseline)', async () => {
    const r = await rawPost(
      port(),
      [...statelessHeaders(echo.token), 'Mcp-Method: tools/call', 'Mcp-Name: echo'],
      toolCallBody(1, 'echo', { text: 'one line each' }),
    );
    expect({ status: r.status, text: r.json?.result?.content?.[0]?.text }).toEqual({
      status: 200,
      text: 'one line each',
    });
  });

  it('refuses Mcp-Method sent as "tools/call" and again as "tools/list" with 400 / -32020', async () => {
    const before = control.calls.length;
    const r = await rawPost(
      port(),
      [...statelessHeaders(echo.token), 'Mcp-Method: tools/call', 'Mcp-Method: tools/list', 'Mcp-Name: echo'],
      toolCallBody(3, 'echo', { text: 'x' }),
    );
    expect(refusal(r)).toEqual({ status: 400, code: -32020, id: 3 });
    expect(r.json.error.message).toContain("'tools/call, tools/list'");
    expect(control.calls.length).toBe(before);
  });

  it('refuses Mcp-Name sent as "echo" and again as "tap" with 400 / -32020', async () => {
    const before = control.calls.length;
    const r = await rawPost(
      port(),
      [...statelessHeaders(echo.token), 'Mcp-Method: tools/call', 'Mcp-Name: echo', 'Mcp-Name: tap'],
      toolCallBody(4, 'echo', { text: 'x' }),
    );
    expect(refusal(r)).toEqual({ status: 400, code: -32020, id: 4 });
    expect(control.calls.length).toBe(before);
  });

  it('refuses Mcp-Name sent as "tap" and again as "echo" (the last line matching) with 400 / -32020', async () => {
    const before = control.calls.length;
    const r = await rawPost(
      port(),
      [...statelessHeaders(echo.token), 'Mcp-Method: tools/call', 'Mcp-Name: tap', 'Mcp-Name: echo'],
      toolCallBody(5, 'echo', { text: 'x' }),
    );
    expect(refusal(r)).toEqual({ status: 400, code: -32020, id: 5 });
    expect(control.calls.length).toBe(before);
  });

  it('refuses an empty Mcp-Name line before a matching one with 400 / -32020', async () => {
    const before = control.calls.length;
    const r = await rawPost(
      port(),
      [...statelessHeaders(echo.token), 'Mcp-Method: tools/call', 'Mcp-Name:', 'Mcp-Name: echo'],
      toolCallBody(6, 'echo', { text: 'x' }),
    );
    expect(refusal(r)).toEqual({ status: 400, code: -32020, id: 6 });
    expect(control.calls.length).toBe(before);
  });

  it('refuses MCP-Protocol-Version sent twice with 400 / -32020', async () => {
    const before = control.calls.length;
    const r = await rawPost(
      port(),
      [...statelessHeaders(echo.token), 'MCP-Protocol-Version: 2025-11-25', 'Mcp-Method: tools/call', 'Mcp-Name: echo'],
      toolCallBody(7, 'echo', { text: 'x' }),
    );
    expect(refusal(r)).toEqual({ status: 400, code: -32020, id: 7 });
    expect(control.calls.length).toBe(before);
  });

  it('refuses Mcp-Param-Region sent as "us" and again as "eu" for region "eu" with 400 / -32020', async () => {
    const before = regionCalls.length;
    const lines = [...statelessHeaders(regional.token), 'Mcp-Method: tools/call', 'Mcp-Name: where'];
    const ok = await rawPost(port(), [...lines, 'Mcp-Param-Region: eu'], toolCallBody(8, 'where', { region: 'eu' }));
    expect({ status: ok.status, text: ok.json?.result?.content?.[0]?.text }).toEqual({
      status: 200,
      text: 'region: eu',
    });
    const r = await rawPost(
      port(),
      [...lines, 'Mcp-Param-Region: us', 'Mcp-Param-Region: eu'],
      toolCallBody(9, 'where', { region: 'eu' }),
    );
    expect(refusal(r)).toEqual({ status: 400, code: -32020, id: 9 });
    expect(r.json.error.message).toContain("'us, eu'");
    expect(regionCalls.length).toBe(before + 1);
  });
});
