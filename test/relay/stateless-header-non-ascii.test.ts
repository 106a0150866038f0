// Mirrored headers of 2026-07-28 whose bytes are not ASCII. Spec 2026-07-28, streamable-http
// "Server Validation": failure conditions include "A header value contains invalid characters",
// and "Servers MUST reject requests where the values specified in the headers do not match the
// corresponding values in the request body" (400 / -32020). Header values are visible ASCII; a
// client MUST Base64-encode anything else ("=?base64?…?=").
//
// docs/PROTOCOL.md ("Revision 2026-07-28 (stateless)", "Known limitation: bytes outside ASCII at
// the ends of a header value"): the HTTP layer (uWebSockets.js 20.30 on x86-64) trims bytes
// 0x80–0xFF from both ends of every header value as if they were whitespace, before the relay
// sees the value, and shows the relay nothing else of the header: `Mcp-Name: echo\u00e9` reaches
// it as `echo`, byte for byte what `Mcp-Name: echo` gives. Such a value in the middle, or a value
// made only of such bytes (it arrives empty), is refused; at the ends it cannot be. The tests
// of the ends run as expected failures; the last test pins the HTTP layer's trimming, so that a
// uWS whose trimming stops fails it and them, and they are turned into plain tests.
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { useEchoRelay } from '../helpers/per-file.ts';
import type { EchoServerControl } from '../fixtures/echo-server.ts';
import { rawPost, statelessHeaders, toolCallBody } from '../helpers/raw-header-lines.ts';
import { uws } from '../../src/uws.ts';

const control: EchoServerControl = { calls: [], cancellations: 0 };
const echo = useEchoRelay([], { control });

const port = () => echo.relay.relay.node.port;

/** One tools/call of `echo` with these mirrored header lines: its answer, and whether it reached the phone. */
async function callWith(id: number, mirrored: string[]) {
  const before = control.calls.length;
  const r = await rawPost(
    port(),
    [...statelessHeaders(echo.token), ...mirrored],
    toolCallBody(id, 'echo', { text: 'smuggled' }),
  );
  return {
    status: r.status,
    code: r.json?.error?.code,
    id: r.json?.id,
    reachedPhone: control.calls.length > before,
  };
}

const REFUSED = (id: number) => ({ status: 400, code: -32020, id, reachedPhone: false });

describe('2026-07-28 mirrored headers with bytes outside ASCII', () => {
  it('refuses Mcp-Name "ech\\u00e9o" (raw UTF-8 in the middle) with 400 / -32020', async () => {
    expect(await callWith(1, ['Mcp-Method: tools/call', 'Mcp-Name: ech\u00e9o'])).toEqual(REFUSED(1));
  });

  it('refuses Mcp-Method "tools\\u00e4call" (raw UTF-8 in the middle) with 400 / -32020', async () => {
    expect(await callWith(2, ['Mcp-Method: tools\u00e4call', 'Mcp-Name: echo'])).toEqual(REFUSED(2));
  });

  it('refuses an Mcp-Name of only bytes outside ASCII (it arrives empty) with 400 / -32020', async () => {
    expect(await callWith(3, ['Mcp-Method: tools/call', 'Mcp-Name: \u00e9'])).toEqual(REFUSED(3));
  });

  // The HTTP layer trims these bytes before the relay sees the value; the request is
  // indistinguishable from one sending "echo" / "tools/call". Both run as expected failures
  // (uWS trims non-ASCII bytes at a header value's ends, a known limitation: docs/PROTOCOL.md);
  // once an upgrade stops the trimming they pass, `it.fails` reports it, and they become `it`.
  it.fails('refuses Mcp-Name "echo\\u00e9" (raw UTF-8 at the end) with 400 / -32020', async () => {
    expect(await callWith(4, ['Mcp-Method: tools/call', 'Mcp-Name: echo\u00e9'])).toEqual(REFUSED(4));
  });

  // The leading bytes are trimmed too (the last test below pins both ends).
  it.fails('refuses Mcp-Method "\\u00e4tools/call" (raw UTF-8 at the start) with 400 / -32020', async () => {
    expect(await callWith(5, ['Mcp-Method: \u00e4tools/call', 'Mcp-Name: echo'])).toEqual(REFUSED(5));
  });
});

/** The (name, value) pairs uWS hands a handler for a GET carrying these header lines. */
function headersSeenByUws(lines: string[]): Promise<Array<[string, string]>> {
  return new Promise((resolve, reject) => {
    const app = uws.App();
    let seen: Array<[string, string]> = [];
    app.any('/*', (res, req) => {
      seen = [];
      req.forEach((k, v) => seen.push([k, v]));
      res.cork(() => res.end('ok'));
    });
    app.listen('127.0.0.1', 0, (ls) => {
      if (!ls) return reject(new Error('uWS did not listen'));
      const s = connect(uws.us_socket_local_port(ls), '127.0.0.1', () =>
        s.write(
          Buffer.from(`GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`),
        ),
      );
      s.on('data', () => {});
      s.on('error', reject);
      s.on('close', () => {
        uws.us_listen_socket_close(ls);
        resolve(seen.filter(([k]) => k.startsWith('mcp-')));
      });
    });
  });
}

describe('the HTTP layer (pinned: when this fails, turn the skipped tests above on)', () => {
  it.runIf(process.arch === 'x64')(
    'uWS trims bytes outside ASCII from both ends of a header value, keeps them in the middle',
    async () => {
      expect(await headersSeenByUws(['Mcp-Name: \u00e9ch\u00f8', 'Mcp-Method: ech\u00e9o', 'Mcp-X: \u00e9'])).toEqual([
        ['mcp-name', 'ch'],
        ['mcp-method', 'ech\u00e9o'],
        ['mcp-x', ''],
      ]);
    },
  );
});
