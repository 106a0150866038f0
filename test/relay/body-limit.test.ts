// An oversized body gets its 413 at once and the connection ends: the relay reads and drops at
// most a bounded amount of the rest (so that a client still sending reads the 413), never the
// whole body. Raw sockets, so the test sees exactly when the relay hangs up.
import { describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import {} from '../helpers/relay.ts';
import { useEchoRelay } from '../helpers/per-file.ts';

const echo = useEchoRelay();

// More than loopback's socket buffers can hold (tcp_rmem max 32 MiB + tcp_wmem max 4 MiB here):
// a client that got it all out would mean the relay read it.
const BODY = 64 * 1024 * 1024;

/**
 * POSTs a 64 MiB body in 64 KiB writes, waiting for each to drain, until the relay hangs up
 * or everything is sent. Resolves with what came back and how much was accepted.
 */
function pushBody(
  path: string,
  headers: Record<string, string>,
): Promise<{ response: string; sent: number; closed: boolean }> {
  const { port } = new URL(echo.relay.url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1');
    let response = '';
    let sent = 0;
    let closed = false;
    const finish = () => resolve({ response, sent, closed });
    const timer = setTimeout(() => {
      socket.destroy();
      finish();
    }, 20_000);
    socket.on('data', (d) => (response += d.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      closed = true;
      clearTimeout(timer);
      finish();
    });
    const send = async () => {
      const head = Object.entries({ host: `127.0.0.1:${port}`, 'content-length': String(BODY), ...headers })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      while (sent < BODY && !closed && !socket.destroyed) {
        const ok = socket.write(chunk);
        sent += chunk.length;
        if (!ok) await new Promise<void>((r) => socket.once('drain', () => r()).once('close', () => r()));
      }
      // Everything written: a relay that keeps the connection would now leave it open.
      if (!closed) setTimeout(() => socket.destroyed || (socket.destroy(), finish()), 2_000);
    };
    socket.on('connect', () => void send());
  });
}

describe('oversized bodies', () => {
  it('/mcp: 413 with too_large, then the connection closes before the body is sent', async () => {
    const r = await pushBody('/mcp', {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': echo.token,
    });
    expect(r.response).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.response).toContain('"too_large"');
    if (process.env.PB_TEST_VERBOSE) console.log(`/mcp: ${r.sent} bytes accepted before the close`);
    expect(r.closed).toBe(true);
    expect(r.sent).toBeLessThan(BODY);
  });

  it('/pair: the same', async () => {
    const r = await pushBody('/pair', { 'content-type': 'application/json' });
    expect(r.response).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.closed).toBe(true);
    expect(r.sent).toBeLessThan(BODY);
  });

  // A client that writes its whole body before reading (as curl does): without the lingering
  // close, the relay's close with unread data resets the connection under it (EPIPE), and 10 of
  // 10 such clients failed although the 413 had reached them.
  it('a client still sending 10 MiB reads its 413 instead of a reset (lingering close)', async () => {
    const { port } = new URL(echo.relay.url);
    const size = 10 * 1024 * 1024;
    const send = () =>
      new Promise<string>((resolve) => {
        const socket = connect(Number(port), '127.0.0.1');
        let answer = '';
        socket.on('data', (d) => (answer += d.toString('latin1')));
        socket.on('error', (err: NodeJS.ErrnoException) => resolve(`${err.code} after ${answer.length} bytes`));
        socket.on('close', () => resolve(answer));
        socket.write(
          `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\n` +
            `accept: application/json, text/event-stream\r\nx-api-key: ${echo.token}\r\ncontent-length: ${size}\r\n\r\n`,
        );
        socket.end(Buffer.alloc(size, 0x20));
      });
    const answers = await Promise.all(Array.from({ length: 10 }, send));
    for (const a of answers) {
      expect(a).toMatch(/^HTTP\/1\.1 413 /);
      expect(a).toMatch(/\r\nConnection: close\r\n/i);
      expect(a).toContain('"too_large"');
      expect(a.endsWith('\r\n0\r\n\r\n')).toBe(true); // the whole (chunked) answer
    }
  });

  it('a body within the limit on a kept-alive connection still works (unchanged)', async () => {
    const agentless = await fetch(`${echo.relay.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-api-key': echo.token,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    expect(agentless.status).toBe(200);
  });
});
