// Embedded PGlite sharing between processes (docs/decisions/0011-embedded-store-over-unix-socket.md):
// the serve socket, the CLI
// lock, and the leftovers of crashed processes. One data dir for the whole file: creating a
// PGlite cluster costs ~6 s, reopening it ~1 s.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, lstatSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { hashPairingCode, newPairingCode } from '../../crypto/secrets.ts';
import { createStore, LATEST_SCHEMA_VERSION, openStore } from '../index.ts';
import { tempDataDir, uid } from '../test-support.ts';
import { DataDirBusyError, openEmbeddedForCli, serveEmbedded } from './embedded.ts';
import { readLock, tryLock } from './lock.ts';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const CHILD = fileURLToPath(new URL('../test-fixtures/socket-client.ts', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('embedded database shared between processes', () => {
  const dir = tempDataDir();
  const socket = join(dir, '.s.PGSQL.5432');
  const lock = join(dir, '.pglite.lock');
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('serve: another process reads and writes through the socket, several connections at once, while serve holds PGlite', async () => {
    const h = await openStore({ dataDir: dir, role: 'server' });
    try {
      expect(h.source.kind).toBe('embedded');
      expect(h.source.pgConfig).toEqual({ host: dir, port: 5432, user: 'postgres', database: 'postgres', ssl: false });
      expect(lstatSync(socket).isSocket()).toBe(true);
      expect(readLock(lock)).toMatchObject({ pid: process.pid, role: 'serve' });
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(statSync(join(dir, 'pgdata')).mode & 0o777).toBe(0o700);

      const acct = await h.store.ensureAccount(uid('acct'));
      const codeHash = hashPairingCode(newPairingCode());
      await h.store.createPairingCode({ accountId: acct.id, codeHash, expiresAt: new Date(Date.now() + 60_000) });
      const r = await h.store.redeemPairingCode({
        codeHash,
        deviceId: uid('dev'),
        publicKey: 'pk',
        name: 'p',
        now: new Date(),
      });
      if (!r.ok) throw new Error(r.error);

      const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dir, acct.id, r.device.id, '50'], {
        cwd: REPO,
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      children.push(child);
      let out = '';
      child.stdout.setEncoding('utf8');
      const ready = new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d: string) => {
          out += d;
          if (out.startsWith('ready\n')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`child exited ${code} before ready`)));
      });
      const exited = once(child, 'exit');
      await ready;
      // Both processes write at the same moment.
      child.stdin.write('go\n');
      const mine = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          h.store.createToken({
            id: uid('tok'),
            accountId: acct.id,
            deviceId: r.device.id,
            hash: `parent-${i}`,
            scopes: ['devices:read'],
            via: 'key',
          }),
        ),
      );
      const [code] = await exited;
      expect(code).toBe(0);
      const result = JSON.parse(out.split('\n')[1]);
      expect(result).toMatchObject({ host: dir, created: 50, devices: [r.device.id], connections: 4 });
      expect(result.label).toMatch(/via the running serve/);
      expect(mine.every((t) => t.ok)).toBe(true);
      expect(await h.store.listTokens({ accountId: acct.id })).toHaveLength(100);
      // The child never opened PGlite itself.
      expect(readLock(lock)).toMatchObject({ pid: process.pid, role: 'serve' });
      expect(existsSync(join(dir, '.cli', '.s.PGSQL.5432'))).toBe(false);

      // A second serve of the same directory is refused, in this process or any other.
      await expect(serveEmbedded(dir)).rejects.toThrow(/already running/);
      await expect(openStore({ dataDir: dir, role: 'server' })).rejects.toBeInstanceOf(DataDirBusyError);
    } finally {
      await h.close();
    }
    expect(existsSync(socket)).toBe(false);
    expect(existsSync(lock)).toBe(false);
  });

  it('without serve, a CLI command opens the directory under the lock; others wait for it or give up', async () => {
    const cli = await openEmbeddedForCli(dir);
    const serving: { p?: Promise<unknown> } = {};
    try {
      expect(cli.pgConfig.host).toBe(join(dir, '.cli'));
      expect(cli.label).toMatch(/opened by this command/);
      expect(readLock(lock)).toMatchObject({ pid: process.pid, role: 'cli' });
      expect(existsSync(socket)).toBe(false); // nothing published for others to join
      const store = await createStore(cli);
      expect(store.schemaVersion).toBe(LATEST_SCHEMA_VERSION);
      expect((await store.listDevices()).length).toBeGreaterThan(0); // the data from the serve test
      await store.close();

      await expect(openEmbeddedForCli(dir, { waitMs: 200 })).rejects.toThrow(
        /in use by another phonebridge command \(pid \d+\)/,
      );
      await expect(serveEmbedded(dir, { waitMs: 200 })).rejects.toBeInstanceOf(DataDirBusyError);
      // A serve started meanwhile waits for the command to finish, then takes over.
      serving.p = serveEmbedded(dir, { waitMs: 10_000 });
      await sleep(300);
    } finally {
      await cli.close();
    }
    const served = (await serving.p) as Awaited<ReturnType<typeof serveEmbedded>>;
    expect(readLock(lock)).toMatchObject({ pid: process.pid, role: 'serve' });
    await served.close();
  });

  it('removes the socket and lock of a process that was killed', () => {
    const r = spawnSync(process.execPath, [
      '-e',
      `const net = require('net'), fs = require('fs');
       net.createServer().listen(${JSON.stringify(socket)}, () => {
         fs.writeFileSync(${JSON.stringify(lock)}, JSON.stringify({ pid: process.pid, role: 'serve' }));
         process.kill(process.pid, 'SIGKILL');
       });`,
    ]);
    expect(r.signal).toBe('SIGKILL');
    expect(lstatSync(socket).isSocket()).toBe(true);
    expect(readLock(lock)?.pid).toBe(r.pid);
    return (async () => {
      // A CLI command finds nobody answering and the holder dead: it opens the directory itself.
      const cli = await openEmbeddedForCli(dir, { waitMs: 0 });
      expect(cli.label).toMatch(/opened by this command/);
      await cli.close();
      // serve clears the dead socket and publishes its own.
      writeFileSync(lock, JSON.stringify({ pid: r.pid, role: 'serve' }));
      const h = await openStore({ dataDir: dir, role: 'server', waitMs: 0 });
      expect(readLock(lock)).toMatchObject({ pid: process.pid, role: 'serve' });
      expect(await h.store.getAccount('local')).toBeDefined();
      await h.close();
    })();
  });

  it('a lock held by another live process is respected until that process is gone', async () => {
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    children.push(holder);
    writeFileSync(lock, JSON.stringify({ pid: holder.pid, role: 'cli', startedAt: new Date().toISOString() }));
    await expect(openEmbeddedForCli(dir, { waitMs: 300 })).rejects.toThrow(new RegExp(`pid ${holder.pid}\\)`));
    await expect(openStore({ dataDir: dir, role: 'server', waitMs: 300 })).rejects.toBeInstanceOf(DataDirBusyError);
    expect(readLock(lock)?.pid).toBe(holder.pid); // refusing did not touch it
    holder.kill('SIGKILL');
    await once(holder, 'exit');
    const cli = await openEmbeddedForCli(dir, { waitMs: 0 });
    await cli.close();
  });

  it('lock files: our own pid from an earlier life and half-written files count as stale', () => {
    const p = join(dir, 'unit.lock');
    // Same pid as ours but not taken by this process: a previous incarnation (containers reuse pids).
    writeFileSync(p, JSON.stringify({ pid: process.pid, role: 'serve' }));
    const a = tryLock(p, 'cli');
    expect(a.ok).toBe(true);
    // ...whereas one we hold is respected.
    expect(tryLock(p, 'cli')).toMatchObject({ ok: false, holder: { pid: process.pid } });
    if (a.ok) a.release();
    expect(existsSync(p)).toBe(false);
    writeFileSync(p, '{"pi');
    const b = tryLock(p, 'serve');
    expect(b.ok).toBe(true);
    if (b.ok) b.release();
  });

  it('refuses a data dir whose socket path would be too long', async () => {
    const long = join(dir, 'x'.repeat(100));
    await expect(serveEmbedded(long)).rejects.toThrow(/too long for a Unix socket/);
    expect(existsSync(long)).toBe(false);
  });
});
