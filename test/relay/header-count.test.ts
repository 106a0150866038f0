// The most header lines a request may carry (docs/OPERATIONS.md, "Limits"): the HTTP layer
// (uWebSockets.js 20.30, its compiled-in header table) answers a request of 48 header lines,
// Host included; one with more gets no answer, and uWS closes its connection only when its
// idle timeout ends (about 10 s). Nothing in the relay sees such a request. Pinned here so that
// a uWS upgrade that moves the limit is noticed and the documented number kept true.
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { startChild, type Child } from '../helpers/processes.ts';
import { tempDataDir } from '../../src/store/test-support.ts';

const children: Child[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
});

/** What the relay sends back to a GET /mcp of `lines` header lines, until it closes or 2 s pass. */
function getWithHeaders(port: number, lines: number): Promise<{ answer: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let answer = '';
    const headers = ['host: 127.0.0.1', ...Array.from({ length: lines - 1 }, (_, i) => `x-extra-${i}: v`)];
    const done = (closed: boolean) => {
      clearTimeout(timer);
      s.destroy();
      resolve({ answer, closed });
    };
    const timer = setTimeout(() => done(false), 2000);
    s.on('data', (d) => {
      answer += d.toString('latin1');
      if (answer.includes('\r\n\r\n')) done(false);
    });
    s.on('close', () => done(true));
    s.on('error', () => {});
    s.write(`GET /mcp HTTP/1.1\r\n${headers.join('\r\n')}\r\n\r\n`);
  });
}

describe('header lines per request', () => {
  it('48 are answered; 49 get no answer', async () => {
    const relay = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', tempDataDir()]);
    children.push(relay);
    const { port } = await relay.ready;
    const ok = await getWithHeaders(port as number, 48);
    expect(ok.answer).toMatch(/^HTTP\/1\.1 [1-5]\d\d /);
    const over = await getWithHeaders(port as number, 49);
    expect(over.answer).toBe('');
    // The same connection's fate does not matter to the next: a new one is answered.
    expect((await getWithHeaders(port as number, 2)).answer).toMatch(/^HTTP\/1\.1 [1-5]\d\d /);
  });
});
