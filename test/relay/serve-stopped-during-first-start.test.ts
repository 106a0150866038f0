// A serve stopped while it creates a new embedded data dir: npm start's first run takes seconds,
// and Ctrl-C, a rollout's SIGTERM or a crash may land in it. docs/OPERATIONS.md "Stopped while
// starting": "SIGTERM or Ctrl-C before the node is ready … abandons the start and exits 0 at
// once", and "a stop, a kill -9 or a crash in the middle leaves `<data-dir>/pgdata.creating`
// beside it, and the next start … makes `pgdata` again from the start instead of failing on the
// half-made one" (docs/decisions/0011-embedded-store-over-unix-socket.md).
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startChild, type Child } from '../helpers/processes.ts';
import { tempDir } from '../helpers/relay.ts';

const children: Child[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function countFiles(dir: string): number {
  let n = 0;
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = join(dir, e);
    try {
      n += statSync(p).isDirectory() ? countFiles(p) : 1;
    } catch {
      // vanished meanwhile
    }
  }
  return n;
}

/** Starts serve on a new data dir and signals it once PGlite is writing pgdata, before it is ready. */
async function interruptFirstStart(
  signal: NodeJS.Signals,
): Promise<{ data: string; first: { code: number | null; signal: string | null } }> {
  const data = tempDir('pb-first-start-');
  dirs.push(data);
  const serve = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', data]);
  children.push(serve);
  let ready = false;
  void serve.ready.then(
    () => (ready = true),
    () => {},
  );
  const deadline = Date.now() + 60_000;
  while (countFiles(join(data, 'pgdata')) < 20) {
    if (Date.now() > deadline) throw new Error('pgdata never filled');
    await new Promise((r) => setTimeout(r, 5));
  }
  expect(ready).toBe(false); // the signal lands inside the first start
  serve.proc.kill(signal);
  const first = await serve.exited;
  return { data, first };
}

async function startsAgain(data: string): Promise<string> {
  const again = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', data]);
  children.push(again);
  try {
    await again.ready;
    return 'ready';
  } catch (err) {
    return String(err);
  } finally {
    await again.kill('SIGTERM');
  }
}

describe('a serve interrupted during its first start', () => {
  it('SIGTERM: exits 0 at once, and the data dir starts on the next serve', async () => {
    const { data, first } = await interruptFirstStart('SIGTERM');
    expect(first).toEqual({ code: 0, signal: null });
    expect(await startsAgain(data)).toBe('ready');
  }, 180_000);

  it('kill -9 (a crash): the data dir starts on the next serve', async () => {
    const { data } = await interruptFirstStart('SIGKILL');
    expect(await startsAgain(data)).toBe('ready');
  }, 180_000);
});
