// A command loads what it uses and no more: services/cli.ts loads serve.ts for `serve` alone,
// the store loads PGlite for a data dir alone (src/store/database/index.ts), serve loads hosted
// mode for --hosted alone and the OpenTelemetry SDK only when OTEL_* variables turn tracing on
// (src/observability/tracing.ts). Read from the module URLs the command's process resolves
// (test/fixtures/record-modules.mjs).
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDatabase } from '../cluster/harness.ts';
import { BIN, startChild } from '../helpers/processes.ts';
import { tempDir } from '../helpers/relay.ts';

const run = promisify(execFile);
const RECORDER = new URL('../fixtures/record-modules.mjs', import.meta.url).pathname;

let db: Awaited<ReturnType<typeof createDatabase>>;
const dirs: string[] = [];
/** A temporary directory, removed after the file's tests. */
function dir(): string {
  const d = tempDir();
  dirs.push(d);
  return d;
}
beforeAll(async () => {
  db = await createDatabase();
});
afterAll(async () => {
  await db?.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The module URLs a process started with RECORDER wrote to `file`. */
const recorded = (file: string) => readFileSync(file, 'utf8').split('\n');

/** Runs a one-shot command and gives the module URLs it resolved. */
async function modulesOf(args: string[]): Promise<string[]> {
  const file = join(dir(), 'modules.txt');
  await run(process.execPath, ['--import', RECORDER, BIN, ...args], {
    env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn', PB_RECORD_MODULES: file },
  });
  return recorded(file);
}

const relayModules = (urls: string[]) =>
  urls.filter((u) => /\/services\/serve\.ts$|\/src\/gateway\/node\.ts$|uWebSockets\.js/.test(u));
const pglite = (urls: string[]) => urls.filter((u) => u.includes('@electric-sql/pglite'));

it('a command on Postgres loads neither the relay nor PGlite', async () => {
  const urls = await modulesOf(['devices', 'list', '--json', '--database-url', db.url]);
  expect(urls.some((u) => u.endsWith('/services/cli.ts'))).toBe(true);
  expect(urls.some((u) => u.endsWith('/src/store/kysely-store.ts'))).toBe(true);
  expect(relayModules(urls)).toEqual([]);
  expect(pglite(urls)).toEqual([]);
});

it('a command on a data dir loads PGlite, still without the relay', async () => {
  const urls = await modulesOf(['devices', 'list', '--json', '--data-dir', dir()]);
  expect(pglite(urls).length).toBeGreaterThan(0);
  expect(relayModules(urls)).toEqual([]);
});

it('--help loads neither', async () => {
  const urls = await modulesOf(['--help']);
  expect(urls.some((u) => u.endsWith('/services/cli.ts'))).toBe(true);
  expect(relayModules(urls)).toEqual([]);
  expect(pglite(urls)).toEqual([]);
});

it('serve on Postgres, without --hosted and with tracing off, loads neither PGlite, hosted mode nor the tracing SDK', async () => {
  const file = join(dir(), 'modules.txt');
  const serve = startChild(
    ['serve', '--port', '0', '--admin-port', '0', '--data-dir', dir(), '--database-url', db.url],
    // Tracing off, whatever the environment running the tests says.
    { PB_RECORD_MODULES: file, OTEL_SDK_DISABLED: 'true' },
    ['--import', RECORDER],
  );
  try {
    await serve.ready;
  } finally {
    await serve.kill();
  }
  const urls = recorded(file);
  expect(relayModules(urls).length).toBeGreaterThan(0);
  expect(pglite(urls)).toEqual([]);
  expect(urls.filter((u) => /\/src\/hosted\/(index|oauth|mail|dashboard)\.ts$|\/nodemailer\//.test(u))).toEqual([]);
  expect(urls.filter((u) => /@opentelemetry\/(sdk-trace|exporter-)|tracing-pipeline\.ts$/.test(u))).toEqual([]);
  expect(urls.some((u) => u.endsWith('/src/observability/tracing.ts'))).toBe(true);
});
