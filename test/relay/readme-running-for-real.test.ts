// README.md, "Running it for real", step by step in one working directory: the relay runs on
// Postgres and the CLI is told the same database (PHONEBRIDGE_DATABASE_URL, exported before
// `serve`), so the code `phonebridge pair` prints pairs a phone with that relay. Without the
// database the CLI would mint the code in an embedded database in ./.phonebridge that serve never
// reads, and the phone would get 403 bad_code.
import { afterAll, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createInterface } from 'node:readline';
import { tempDir } from '../helpers/relay.ts';
import { BIN } from '../helpers/processes.ts';
import { createDatabase } from '../cluster/harness.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';

const run = promisify(execFile);
const README = fileURLToPath(new URL('../../README.md', import.meta.url));
const cleanup: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
}, 30_000);

/** The commands of the section's first sh block. */
function documentedSteps(): string[] {
  const doc = readFileSync(README, 'utf8');
  const section = doc.slice(doc.indexOf('## Running it for real'));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('README: no sh block under "Running it for real"');
  return block[1].split('\n').filter(Boolean);
}

it('README "Running it for real": a code from `phonebridge pair` (same directory as serve) pairs a phone with that serve', async () => {
  // The steps as documented: the database is exported once, then serve and pair run without it.
  const steps = documentedSteps();
  const exportAt = steps.findIndex((l) => /^export PHONEBRIDGE_DATABASE_URL=postgres:\/\//.test(l));
  const serveAt = steps.findIndex((l) => l.startsWith('phonebridge serve '));
  const pairAt = steps.findIndex((l) => l.startsWith('phonebridge pair '));
  expect(exportAt, 'README exports PHONEBRIDGE_DATABASE_URL').toBeGreaterThanOrEqual(0);
  expect(exportAt, 'before serve').toBeLessThan(serveAt);
  expect(serveAt, 'serve before pair').toBeLessThan(pairAt);
  expect(steps[pairAt], 'pair takes the database from the environment').not.toContain('--database-url');

  const db = await createDatabase();
  cleanup.push(() => db.drop().catch(() => {}));
  const cwd = tempDir('pb-readme-');
  cleanup.push(() => rmSync(cwd, { recursive: true, force: true }));
  // `export PHONEBRIDGE_DATABASE_URL=…`: every command below inherits it.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PHONEBRIDGE_LOG_LEVEL: 'warn',
    PHONEBRIDGE_EXIT_WITH_PARENT: '1',
    PHONEBRIDGE_DATABASE_URL: db.url,
  };
  delete env.PHONEBRIDGE_DATA_DIR;

  // serve as documented, on a free local port instead of the example's public URL and Redis.
  const serve = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--admin-port', '0'], {
    cwd,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  cleanup.push(() => void serve.kill('SIGKILL'));
  const ready = await new Promise<{ port: number }>((resolve, reject) => {
    createInterface({ input: serve.stdout }).on('line', (l) => {
      if (l.startsWith('{"ready"')) resolve(JSON.parse(l));
    });
    serve.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
  });
  const url = `http://127.0.0.1:${ready.port}`;

  // The README's next command, from the same directory, as written (plus --json to read it).
  const { stdout } = await run(process.execPath, [BIN, 'pair', '--name', 'Pixel 8', '--json'], { cwd, env });
  const qr = JSON.parse(stdout.trim()) as { relay: string; code: string };
  expect(qr.relay, 'pair found the public URL serve left in relay.json').toBe(url);

  // The phone redeems the code at that relay.
  const r = await fetch(`${url}/pair`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code: qr.code, public_key: generateDeviceKey().publicKeySpkiBase64, name: 'Pixel 8' }),
  });
  const body = await r.text();
  expect(r.status, `POST /pair with the code \`phonebridge pair\` printed: ${body}`).toBe(200);
}, 120_000);
