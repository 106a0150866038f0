// Keep-alive as clients meet it (docs/decisions/0190-keep-alive-hint.md): every answer that
// leaves the connection open advertises `Keep-Alive: timeout=5`, the relay never closes an idle
// connection sooner, and a client that honours the hint never sends a request into a
// connection the relay has closed — the replayed "pair, run the CLI, call /mcp" sequence.
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { startChild, type Child } from '../helpers/processes.ts';
import { postgresBackend, tempDataDir, type TestBackend } from '../../src/store/test-support.ts';
import { KEEP_ALIVE_TIMEOUT_S } from '../../src/gateway/http.ts';

const REPLAY = fileURLToPath(new URL('../fixtures/keep-alive-replay.ts', import.meta.url));
const children: Child[] = [];
const backends: TestBackend[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const b of backends) await b.cleanup();
});

async function serve(store: 'embedded' | 'postgres'): Promise<{ url: string; port: number; cli: string[] }> {
  const dataDir = tempDataDir();
  let cli = ['--data-dir', dataDir];
  if (store === 'postgres') {
    const pg = postgresBackend();
    backends.push(pg);
    const source = await pg.open(); // creates the database
    await source.close();
    cli = ['--database-url', pg.reopenOptions().databaseUrl!, '--data-dir', dataDir];
  }
  const relay = startChild(['serve', '--port', '0', '--admin-port', '0', '--max-in-flight', '100', ...cli]);
  children.push(relay);
  const ready = await relay.ready;
  return { url: `http://127.0.0.1:${ready.port}`, port: ready.port as number, cli };
}

/** Raw HTTP/1.1 over one socket: each answer's head, and when the relay ends the connection. */
class RawConnection {
  readonly socket: Socket;
  private buf = '';
  private waiter?: (head: Record<string, string>) => void;
  readonly ended: Promise<number>;
  lastAnswerAt = 0;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.ended = new Promise((r) => this.socket.once('end', () => r(Date.now())));
    this.socket.on('data', (d) => {
      this.buf += d.toString('latin1');
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head: Record<string, string> = {};
      const lines = this.buf.slice(0, end).split('\r\n');
      head[':status'] = lines[0].split(' ')[1];
      for (const l of lines.slice(1))
        head[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
      const length = Number(head['content-length'] ?? 0);
      if (this.buf.length < end + 4 + length) return;
      this.buf = this.buf.slice(end + 4 + length);
      this.lastAnswerAt = Date.now();
      this.waiter?.(head);
    });
  }

  send(method: string, path: string, body = '', headers: Record<string, string> = {}): Promise<Record<string, string>> {
    const head = Object.entries({ host: 'relay', 'content-length': String(Buffer.byteLength(body)), ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    return new Promise((resolve, reject) => {
      this.waiter = resolve;
      void this.ended.then(() => reject(new Error(`connection ended before the answer to ${method} ${path}`)));
      this.socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n${body}`);
    });
  }
}

const HINT = `timeout=${KEEP_ALIVE_TIMEOUT_S}`;

describe('keep-alive', () => {
  it('advertises the hint on every answer that keeps the connection, and outlives it', async () => {
    const relay = await serve('embedded');
    const c = new RawConnection(relay.port);
    const answers = [
      await c.send('POST', '/device/challenge', '{"device_id":"dev_x"}', { 'content-type': 'application/json' }),
      await c.send('GET', '/no-such-endpoint'),
      await c.send('POST', '/mcp', '{}', {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      }),
      await c.send('POST', '/device/challenge', 'not json', { 'content-type': 'application/json' }),
    ];
    expect(answers.map((a) => a[':status'])).toEqual(['200', '404', '401', '400']);
    for (const a of answers) {
      expect(a['keep-alive']).toBe(HINT);
      expect(a.connection).toBeUndefined();
    }

    // Just inside the hint, the same connection is still served.
    await new Promise((r) => setTimeout(r, KEEP_ALIVE_TIMEOUT_S * 1000 - 600));
    expect((await c.send('GET', '/no-such-endpoint'))['keep-alive']).toBe(HINT);

    // An answer that ends the connection says so, with no hint.
    const big = new RawConnection(relay.port);
    const tooLarge = await big.send('POST', '/device/challenge', 'x'.repeat(64 * 1024), {
      'content-type': 'application/json',
    });
    expect(tooLarge[':status']).toBe('413');
    expect(tooLarge['keep-alive']).toBeUndefined();
    big.socket.destroy();

    // The relay closes idle connections itself only after the hint: five of them, so that
    // the sweep's phase varies.
    const idle = Array.from({ length: 5 }, () => new RawConnection(relay.port));
    await Promise.all(idle.map((i) => i.send('GET', '/no-such-endpoint')));
    const closedAfter = await Promise.all([c, ...idle].map(async (i) => (await i.ended) - i.lastAnswerAt));
    for (const ms of closedAfter) expect(ms).toBeGreaterThan(KEEP_ALIVE_TIMEOUT_S * 1000);
  }, 60_000);

  // The relay closes an idle connection 8–12 s after its last answer. The replaying client is
  // blocked for 12.5 s (its CLI runs, then a blocked wait): without a hint it reuses connections
  // the relay has closed and every one of its 20 calls fails; with the hint it opens new ones.
  for (const store of ['embedded', 'postgres'] as const) {
    it(`a client that honours the hint replays pair → CLI → /mcp 20 times without a closed connection (${store})`, async () => {
      const relay = await serve(store);
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          process.execPath,
          ['--import', 'tsx', REPLAY, JSON.stringify({ url: relay.url, cli: relay.cli, clients: 20, idleMs: 12_500 })],
          { timeout: 150_000 },
          (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
        ),
      );
      const result = JSON.parse(out.trim().split('\n').pop()!) as {
        ok: number;
        failed: Array<{ client: number; error: string }>;
        reused: number;
        hints: string[];
        blockedMs: number;
      };
      expect(result.blockedMs).toBeGreaterThanOrEqual(12_500);
      expect(result.failed).toEqual([]);
      expect(result.ok).toBe(20);
      expect(result.hints).toEqual([HINT]);
      expect(result.reused).toBe(0); // every pooled connection had passed its hint
    }, 180_000);
  }
});
