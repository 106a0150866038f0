// A request in a session of a session-era revision reads each header /mcp needs from its first
// line (docs/decisions/0262-session-requests-read-headers-by-name.md; docs/PROTOCOL.md, "Header
// lines"): a header sent on several lines counts as its first, an empty first line as no header,
// as Node's HTTP server reads authorization or content-type. A request of 2026-07-28, or one
// whose first version line names no session-era revision, is read over every line as before
// (test/relay/stateless-repeated-header-lines.test.ts).
import { describe, expect, it } from 'vitest';
import { useEchoRelay } from '../helpers/per-file.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';
import { rawPost, toolCallBody } from '../helpers/raw-header-lines.ts';

const control: EchoServerControl = { calls: [], cancellations: 0 };
const echo = useEchoRelay([], { control });
const port = () => echo.relay.relay.node.port;
const SESSION_ERA = '2025-11-25';

const json = ['Content-Type: application/json', 'Accept: application/json, text/event-stream'];
const body = (id: number, method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

/** A session opened over raw lines: its Mcp-Session-Id. */
async function openSession(): Promise<string> {
  const init = await rawPost(
    port(),
    [...json, `X-Api-Key: ${echo.token}`],
    body(0, 'initialize', {
      protocolVersion: SESSION_ERA,
      capabilities: {},
      clientInfo: { name: 'session-lines', version: '1' },
    }),
  );
  expect(init.status).toBe(200);
  const id = /^mcp-session-id: *(\S+)/im.exec(init.head)?.[1];
  expect(id).toBeTruthy();
  return id!;
}

/** tools/call of echo with these header lines: its status, error code, text, and whether the phone saw it. */
async function callWith(id: number, lines: string[]) {
  const before = control.calls.length;
  const r = await rawPost(
    port(),
    [...json, ...lines],
    body(id, 'tools/call', { name: 'echo', arguments: { text: `call ${id}` } }),
  );
  return {
    status: r.status,
    code: r.json?.error?.code,
    text: r.json?.result?.content?.[0]?.text,
    reachedPhone: control.calls.length > before,
  };
}

describe('session-era header lines', () => {
  it('serves a call with each header on one line (the baseline)', async () => {
    const sid = await openSession();
    const r = await callWith(1, [
      `X-Api-Key: ${echo.token}`,
      `Mcp-Session-Id: ${sid}`,
      `MCP-Protocol-Version: ${SESSION_ERA}`,
    ]);
    expect(r).toEqual({ status: 200, code: undefined, text: 'call 1', reachedPhone: true });
  });

  it('reads MCP-Protocol-Version from its first line: a second line, even of 2026-07-28, is not read', async () => {
    const sid = await openSession();
    const base = [`X-Api-Key: ${echo.token}`, `Mcp-Session-Id: ${sid}`, `MCP-Protocol-Version: ${SESSION_ERA}`];
    expect(await callWith(2, [...base, `MCP-Protocol-Version: ${SESSION_ERA}`])).toMatchObject({
      status: 200,
      text: 'call 2',
    });
    expect(await callWith(3, [...base, 'MCP-Protocol-Version: 2026-07-28'])).toMatchObject({
      status: 200,
      text: 'call 3',
    });
  });

  it('reads a request whose first version line is 2026-07-28 over every line: the joined field is refused', async () => {
    const sid = await openSession();
    const r = await callWith(4, [
      `X-Api-Key: ${echo.token}`,
      `Mcp-Session-Id: ${sid}`,
      'MCP-Protocol-Version: 2026-07-28',
      `MCP-Protocol-Version: ${SESSION_ERA}`,
    ]);
    expect(r).toMatchObject({ status: 400, reachedPhone: false });
  });

  it('refuses a body of 2026-07-28 under session headers at the version compare, Mcp-Method unread', async () => {
    const sid = await openSession();
    const before = control.calls.length;
    const r = await rawPost(
      port(),
      [...json, `X-Api-Key: ${echo.token}`, `Mcp-Session-Id: ${sid}`, `MCP-Protocol-Version: ${SESSION_ERA}`],
      toolCallBody(8, 'echo', { text: 'mixed' }),
    );
    expect({ status: r.status, code: r.json?.error?.code, message: r.json?.error?.message }).toEqual({
      status: 400,
      code: -32020,
      message: expect.stringContaining('MCP-Protocol-Version'),
    });
    expect(control.calls.length).toBe(before);
  });

  it('takes the first Mcp-Session-Id and X-Api-Key lines; an empty first key line is no key (401)', async () => {
    const sid = await openSession();
    const other = await openSession();
    const version = `MCP-Protocol-Version: ${SESSION_ERA}`;
    expect(
      await callWith(5, [`X-Api-Key: ${echo.token}`, `Mcp-Session-Id: ${sid}`, `Mcp-Session-Id: ${other}x`, version]),
    ).toMatchObject({ status: 200, text: 'call 5' });
    expect(
      await callWith(6, [`X-Api-Key: ${echo.token}`, `Mcp-Session-Id: ${sid}x`, `Mcp-Session-Id: ${sid}`, version]),
    ).toMatchObject({ status: 404, reachedPhone: false });
    expect(
      await callWith(7, ['X-Api-Key:', `X-Api-Key: ${echo.token}`, `Mcp-Session-Id: ${sid}`, version]),
    ).toMatchObject({
      status: 401,
      reachedPhone: false,
    });
  });
});
