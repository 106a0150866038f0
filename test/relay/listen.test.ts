// Where a relay listens: its ports are its own (a second relay on the same port fails loudly
// instead of taking half the connections), off loopback it needs a public URL, and its admin
// port stays on loopback unless told otherwise.
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { request } from 'node:http';
import { startTestRelay, tempDir, type TestRelay } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';
import { ListenError } from '../../src/gateway/listen-error.ts';

const children: Child[] = [];
const relays: TestRelay[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  await Promise.all(relays.map((r) => r.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir('pb-listen-');
  dirs.push(d);
  return d;
}

/** Status of GET path on host:port, or the connection error's code. */
function probe(host: string, port: number, path: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, timeout: 3000 }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', (err) => resolve((err as NodeJS.ErrnoException).code ?? 'error'));
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

describe('exclusive ports', () => {
  it('a second relay on the same client or admin port fails and the first keeps every connection', async () => {
    const first = await startTestRelay();
    relays.push(first);
    const { port, adminPort } = first.relay.node;
    const taken = await startTestRelay(['--port', String(port)]).catch((err: Error) => err);
    expect(taken).toBeInstanceOf(ListenError);
    expect((taken as Error).message).toMatch(
      new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(--port\\): the port is in use`),
    );
    await expect(startTestRelay(['--admin-port', String(adminPort)])).rejects.toThrow(/\(--admin-port\)/);
    // Every connection still reaches the first relay (with SO_REUSEPORT the kernel would split them).
    const statuses = await Promise.all(Array.from({ length: 12 }, () => probe('127.0.0.1', adminPort, '/healthz')));
    expect(statuses).toEqual(Array(12).fill(200));
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        fetch(`${first.url}/nothing-here`, { headers: { connection: 'close' } }).then((r) => r.status),
      ),
    );
    expect(answers).toEqual(Array(12).fill(404));
  });

  it('phonebridge serve on a taken port exits 2 with a clear message', async () => {
    const first = await startTestRelay();
    relays.push(first);
    const second = startChild([
      'serve',
      '--port',
      String(first.relay.node.port),
      '--admin-port',
      '0',
      '--data-dir',
      dir(),
    ]);
    children.push(second);
    expect((await second.exited).code).toBe(2);
    expect(second.stderr.join('\n')).toMatch(/cannot listen on 127\.0\.0\.1:\d+ \(--port\): the port is in use/);
  });
});

describe('secure defaults off loopback', () => {
  it('phonebridge serve --host 0.0.0.0 without --public-url refuses to start (exit 2)', async () => {
    const serve = startChild(['serve', '--host', '0.0.0.0', '--port', '0', '--admin-port', '0', '--data-dir', dir()]);
    children.push(serve);
    expect((await serve.exited).code).toBe(2);
    expect(serve.stderr.join('\n')).toMatch(/--host 0\.0\.0\.0 is not a loopback address: set --public-url/);
  });

  it('keeps the admin port on loopback while the client port listens everywhere; --admin-host moves it', async () => {
    // 127.0.0.2 is another address of this machine: reachable through 0.0.0.0, not through 127.0.0.1.
    const wide = await startTestRelay(['--host', '0.0.0.0', '--public-url', 'http://127.0.0.1:1']);
    relays.push(wide);
    const { port, adminPort } = wide.relay.node;
    expect(await probe('127.0.0.2', port, '/nothing-here')).toBe(404);
    expect(await probe('127.0.0.1', adminPort, '/healthz')).toBe(200);
    expect(await probe('127.0.0.2', adminPort, '/healthz')).toBe('ECONNREFUSED');

    const moved = await startTestRelay(['--admin-host', '127.0.0.2']);
    relays.push(moved);
    expect(await probe('127.0.0.2', moved.relay.node.adminPort, '/healthz')).toBe(200);
    expect(await probe('127.0.0.1', moved.relay.node.adminPort, '/healthz')).toBe('ECONNREFUSED');
  });
});
