// stalls: the worst event-loop stall of `phonebridge serve` during the store-heavy moments —
// the CLI working on the store (on the embedded store its queries run inside `serve`),
// registering phones, pairing over /pair, a reconnect storm, the invalidation journal's poll.
// `phonebridge_process_nodejs_eventloop_lag_max_seconds` resets at each scrape, so a scrape
// before and after each step brackets it (docs/OPERATIONS.md "Keep-alive").
//
//   npm run loadtest -- stalls [--phones N] [--database-url postgres://…/<an empty database>]
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { parseArgs, promisify } from 'node:util';
import { startChild, BIN } from '../test/helpers/processes.ts';
import { openStore, LOCAL_ACCOUNT_ID, type Store } from '../src/store/index.ts';
import { createPairing, registerDevices } from '../src/provisioning.ts';
import { hashPairingCode, newId } from '../src/crypto/secrets.ts';
import { generateDeviceKey } from '../src/crypto/device-auth.ts';
import { tempDataDir } from '../src/store/test-support.ts';
import { connectPhones } from './lib/phones.ts';
import { loadSurface } from './lib/light-phone.ts';

const { values } = parseArgs({
  options: { phones: { type: 'string', default: '300' }, 'database-url': { type: 'string' } },
});
const phones = Number(values.phones);
const dataDir = tempDataDir();
const storeFlags = values['database-url']
  ? ['--database-url', values['database-url'], '--data-dir', dataDir]
  : ['--data-dir', dataDir];
const run = promisify(execFile);
const cli = (args: string[]) =>
  run(process.execPath, [BIN, ...args, ...storeFlags], { env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn' } });

const serve = startChild(['serve', '--port', '0', '--admin-port', '0', ...storeFlags]);
const ready = await serve.ready;
const url = String(ready.url).replace(/\/mcp$/, '');
const metricsUrl = `http://127.0.0.1:${ready.adminPort}/metrics`;

async function lagMax(): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return Number(/^phonebridge_process_nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text)![1]);
}

const rows: Array<{ step: string; worstStallMs: number; seconds: number }> = [];
async function step(name: string, fn: () => Promise<unknown>): Promise<void> {
  await lagMax();
  const started = Date.now();
  await fn();
  rows.push({ step: name, worstStallMs: Math.round((await lagMax()) * 1000), seconds: (Date.now() - started) / 1000 });
  console.log(JSON.stringify(rows[rows.length - 1]));
}

const register = (store: Store, count: number, publicKey: string) =>
  registerDevices(store, { relay: url, count, publicKey, namePrefix: 'stall-' });

const opened = await openStore({ databaseUrl: values['database-url'], dataDir, role: 'cli' });
const { store } = opened;
const publicKey = generateDeviceKey().publicKeySpkiBase64;
let population: Awaited<ReturnType<typeof connectPhones>> | undefined;
try {
  await step('idle, 5 s', () => new Promise((r) => setTimeout(r, 5000)));
  await step('CLI: pair --json ×3', async () => {
    for (let i = 0; i < 3; i++) await cli(['pair', '--json']);
  });
  let ids: string[] = [];
  await step(`store: ${phones} phones registered (as the CLI does)`, async () => {
    ids = await register(store, phones, publicKey);
  });
  await step('CLI: keys create ×3', async () => {
    for (let i = 0; i < 3; i++) await cli(['keys', 'create', '--device', ids[i], '--json']);
  });
  await step('pairing: 10 phones over /pair', async () => {
    for (let i = 0; i < 10; i++) {
      const qr = await createPairing(store, { relay: url, name: null });
      const r = await fetch(`${url}/pair`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: qr.code, public_key: publicKey, name: 'stall' }),
      });
      if (r.status !== 200) throw new Error(`pair answered ${r.status}`);
    }
  });
  let stormIds: string[] = [];
  await step(`storm: ${phones} phones connect at once`, async () => {
    population = await connectPhones({
      relay: {
        url,
        devices: async (count, key) => {
          stormIds = await register(store, count, key);
          await lagMax(); // the storm's window starts when its phones exist
          return stormIds;
        },
      },
      count: phones,
      surface: loadSurface(),
      concurrency: 200,
    });
  });
  const keys: string[] = [];
  for (let i = 0; i < 50; i++) {
    const id = newId('key');
    const r = await store.createToken({
      id,
      accountId: LOCAL_ACCOUNT_ID,
      deviceId: stormIds[i % stormIds.length],
      hash: hashPairingCode(id),
      scopes: ['devices:read'],
      via: 'key',
    });
    if (r.ok) keys.push(id);
  }
  await step('journal: 50 keys revoked, 3 s of polls', async () => {
    for (const k of keys) await store.revokeToken(k);
    await new Promise((r) => setTimeout(r, 3000));
  });
  console.log('\n| step | worst stall | took |\n| --- | --- | --- |');
  for (const r of rows) console.log(`| ${r.step} | ${r.worstStallMs} ms | ${r.seconds.toFixed(1)} s |`);
} finally {
  await population?.closeAll();
  await opened.close();
  await serve.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(0);
