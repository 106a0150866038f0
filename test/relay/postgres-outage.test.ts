// Postgres unreachable: existing authenticated traffic goes on from the
// node's short-lived cache; new pairings get a clear 503; nothing hangs; it recovers.
// The relay reaches a fresh database through a TCP proxy of our own that the test cuts.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServer, connect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { connectClient, startEchoRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import { postJson } from '../helpers/raw-device.ts';
import { sample, waitForSample } from '../helpers/metrics.ts';

const ADMIN = process.env.PHONEBRIDGE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `pb_pgout_${randomBytes(4).toString('hex')}`;

/** A TCP proxy to Postgres whose links can be cut and restored. */
class CuttableProxy {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  port = 0;
  async open(port = 0): Promise<void> {
    this.server = createServer((c) => {
      const up = connect(5432, '127.0.0.1');
      for (const s of [c, up]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      c.pipe(up).pipe(c);
    });
    await new Promise<void>((r) => this.server!.listen(port, '127.0.0.1', r));
    this.port = (this.server.address() as { port: number }).port;
  }
  async cut(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server!.close(() => r()));
  }
}

const proxy = new CuttableProxy();
let relay: TestRelay;
let phone: TestPhone;
let token: string;

async function admin(sql: string) {
  const c = new pg.Client(ADMIN);
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  await admin(`create database ${dbName}`);
  await proxy.open();
  const url = new URL(ADMIN);
  url.port = String(proxy.port);
  url.pathname = `/${dbName}`;
  ({ relay, phone, token } = await startEchoRelay(['--database-url', url.toString()]));
});

afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
  await admin(`drop database if exists ${dbName} with (force)`).catch(() => {});
});

it('keeps serving known clients, answers new pairings with 503, and recovers', async () => {
  const { client } = await connectClient(relay.mcpUrl, token);
  expect((await client.callTool({ name: 'echo', arguments: { text: 'before' } })).content).toEqual([
    { type: 'text', text: 'before' },
  ]);
  const qr = await relay.pair();
  expect(await waitForSample('phonebridge_store_up', 1)).toBe(1);

  await proxy.cut();
  // Existing traffic: answered from the node's caches (credential, session, phone socket).
  expect((await client.callTool({ name: 'echo', arguments: { text: 'during' } })).content).toEqual([
    { type: 'text', text: 'during' },
  ]);
  // A new pairing cannot be stored: a clear 503, quickly, and the code is not burnt.
  const t0 = Date.now();
  const r = await postJson(`${relay.url}/pair`, {
    code: qr.code,
    public_key: generateDeviceKey().publicKeySpkiBase64,
    name: 'late',
  });
  expect(r.status).toBe(503);
  expect(r.json.error).toBe('store_unavailable');
  expect(r.headers.get('retry-after')).toBeTruthy();
  expect(Date.now() - t0).toBeLessThan(15_000);
  // An unknown key cannot be checked: 503, not 401 and not a hang.
  const unknown = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'pb_unknown' },
    body: '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}',
  });
  expect(unknown.status).toBe(503);
  // The health gauge follows the journal poll (no connection, so no query for Kysely to time);
  // the key that could not be checked is counted.
  expect(await waitForSample('phonebridge_store_up', 0)).toBe(0);
  expect(await sample('phonebridge_client_auth_failures_total', '{reason="store_unavailable"}')).toBe(1);

  await proxy.open(proxy.port);
  // Back: the same code pairs now (it was not consumed during the outage).
  let ok = await postJson(`${relay.url}/pair`, {
    code: qr.code,
    public_key: generateDeviceKey().publicKeySpkiBase64,
    name: 'late',
  });
  for (let i = 0; i < 20 && ok.status !== 200; i++) {
    await new Promise((res) => setTimeout(res, 250));
    ok = await postJson(`${relay.url}/pair`, {
      code: qr.code,
      public_key: generateDeviceKey().publicKeySpkiBase64,
      name: 'late',
    });
  }
  expect(ok.status).toBe(200);
  expect(await waitForSample('phonebridge_store_up', 1)).toBe(1);
  await client.close();
}, 90_000);
