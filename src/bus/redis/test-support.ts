// Test helpers for the Redis bus: real Redis only (a random key prefix per run, cleaned up), and a
// throwaway redis-server of our own for outage tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { createLogger } from '../../log.ts';

export const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const quietLog = createLogger({ level: 'silent' });

export function randomPrefix(): string {
  return `pbtest:${randomBytes(4).toString('hex')}:`;
}

/** Deletes every key under the prefix. */
export async function dropPrefix(prefix: string, url = REDIS_URL): Promise<void> {
  const r = new Redis(url, { lazyConnect: true });
  await r.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length) await r.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
}

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A private redis-server we may kill and restart on the same port. */
export class ScratchRedis {
  private proc?: ChildProcess;
  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<ScratchRedis> {
    const r = new ScratchRedis(await freePort());
    await r.restart();
    return r;
  }

  async restart(): Promise<void> {
    this.proc = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    const probe = new Redis(this.url, { lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    try {
      await waitFor(
        () =>
          probe.ping().then(
            () => true,
            () => false,
          ),
        5000,
        'scratch redis',
      );
    } finally {
      probe.disconnect();
    }
  }

  /** SIGSTOP freezes it with its connections open (a hung Redis); SIGCONT lets it go on. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    this.proc?.kill(signal);
  }

  /** kill -9: connections drop without a goodbye. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  }
}
