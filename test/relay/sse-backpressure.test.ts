// A GET SSE stream whose client stops reading: uWS reports backpressure and the relay waits for
// onWritable. Once the client reads again, every event already written must reach it at once,
// also when nothing new is queued: while an onWritable handler is registered uWS leaves draining
// to it, so the handler always writes and returns that write's result (src/gateway/sse.ts,
// SseStream.waitWritable). Otherwise the events would wait for the next 15 s keep-alive.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor, type TestRelay } from '../helpers/relay.ts';
import { rawPhoneRelay, type RawPhoneRelay } from '../helpers/raw-phone-relay.ts';
import type { OpenSocket } from '../helpers/raw-device.ts';
import { openSession } from '../helpers/raw-mcp.ts';

let relay: TestRelay;
let token: string;
let s: OpenSocket;
let env: RawPhoneRelay | undefined;

beforeAll(async () => {
  ({ relay, token, s } = env = await rawPhoneRelay({ tools: [], capabilities: { tools: {}, logging: {} } }));
});
afterAll(() => env?.stop());

describe('GET SSE stream and a slow reader', () => {
  it('delivers every event promptly once the client reads again (no wait for the 15 s keep-alive)', async () => {
    const h = await openSession(relay.mcpUrl, token);
    const sock: Socket = connect(Number(new URL(relay.url).port), '127.0.0.1');
    const chunks: Buffer[] = [];
    let head = '';
    sock.on('data', (d: Buffer) => {
      chunks.push(d);
      if (head.length < 4096) head += d.toString('latin1');
    });
    const hdrs = Object.entries({ ...h, accept: 'text/event-stream' })
      .filter(([k]) => k !== 'content-type')
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    sock.write(`GET /mcp HTTP/1.1\r\nHost: x\r\n${hdrs}\r\n`);
    await waitFor(() => head.includes('retry:'), 5000, 'the priming event');
    const openedAt = Date.now();
    sock.pause(); // a client that stops reading

    // The relay's side of this stream (white box only to know when uWS reported backpressure).
    const stream = () => ([...relay.relay.node.ctx.hub.allStreams()][0] as any)?.streams?.at(-1)?.sse;
    const pad = 'x'.repeat(200 * 1024);
    let sent = 0;
    // Notifications one at a time until a write to the client is refused by uWS (backpressure);
    // none after that one, so nothing else is queued when the socket drains.
    for (let i = 0; i < 60 && !stream()?.waiting; i++) {
      s.ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/message',
          params: { level: 'info', data: `n${i}:${pad}` },
        }),
      );
      sent++;
      const before = stream()?.queuedBytes;
      await waitFor(
        () => stream()?.queuedBytes === 0 || stream()?.waiting || stream()?.queuedBytes !== before,
        2000,
      ).catch(() => {});
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(stream()?.waiting, 'uWS never reported backpressure').toBe(true);
    expect(Date.now() - openedAt, 'setup took too long to tell a stall from the keep-alive').toBeLessThan(9000);

    sock.resume(); // the client reads again
    const text = () => Buffer.concat(chunks).toString('latin1');
    const events = () => (text().match(/event: message\ndata: \{[^\n]*\}\n\n/g) ?? []).length;
    const resumedAt = Date.now();
    await waitFor(() => events() >= sent, 3000, `${sent} events`).catch(() => {});
    const seen = events();
    sock.destroy();
    expect(
      { events: seen, afterMs: Date.now() - resumedAt },
      `only ${seen} of ${sent} events reached the client within 3 s of it reading again`,
    ).toMatchObject({ events: sent });
  }, 30_000);
});
