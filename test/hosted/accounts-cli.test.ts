// `phonebridge accounts …` as an operator runs it (real processes, a real Postgres database),
// against a running relay: plan caps at code creation and redemption, lock → 402, unlock → works
// again with no re-pair, all through the store's journal (the CLI has no bus).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../helpers/processes.ts';
import { createDatabase } from '../cluster/harness.ts';
import { connectClient, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { createKey, createPairing } from '../../src/provisioning.ts';
import { startPhoneWithQr, type HostedPhone } from './helpers.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';

let db: Awaited<ReturnType<typeof createDatabase>>;
let relay: TestRelay;
const phones: HostedPhone[] = [];

beforeAll(async () => {
  db = await createDatabase();
  relay = await startTestRelay(['--database-url', db.url, '--control-poll-ms', '50']);
});
afterAll(async () => {
  await Promise.all(phones.map((p) => p.stop()));
  await relay?.stop();
  await db?.drop();
});

const run = (...args: string[]) => cli(['accounts', ...args, '--database-url', db.url]);

async function mcpStatus(token: string): Promise<number> {
  const r = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-api-key': token },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } }),
  });
  return r.status;
}

describe('phonebridge accounts', () => {
  it('create, list, plan; caps at code creation and at redemption; lock → 402; unlock → works without re-pair', async () => {
    const created = JSON.parse(await run('create', '--email', 'Ops@Example.com', '--json'));
    expect(created).toMatchObject({ email: 'ops@example.com', locked: false });
    expect(created.id).toMatch(/^acct_/);
    await expect(run('create', '--email', 'ops@example.com', '--json')).rejects.toThrow(/already exists/);
    await expect(run('create', '--json')).rejects.toThrow(/--email/);

    expect(await run('plan', 'ops@example.com', '--phones', '1', '--keys', '1')).toContain('phones 1, keys 1');
    await expect(run('plan', 'acct_nope', '--phones', '1', '--keys', '1')).rejects.toThrow(/no account/);
    await expect(run('plan', created.id, '--phones', 'many', '--keys', '1')).rejects.toThrow(/non-negative/);

    const store = relay.relay.store.store;
    // Two codes while the account has no phone: both allowed at creation.
    const qr1 = await createPairing(store, { accountId: created.id, relay: relay.url });
    const qr2 = await createPairing(store, { accountId: created.id, relay: relay.url });
    const phone = await startPhoneWithQr(qr1);
    phones.push(phone);
    // At the cap: creating a code is refused, and redeeming the second code too (403 limit_reached).
    await expect(createPairing(store, { accountId: created.id, relay: relay.url })).rejects.toThrow(/plan limit/);
    const pair = await fetch(`${relay.url}/pair`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        code: qr2.code,
        name: 'second',
        public_key: generateDeviceKey().publicKeySpkiBase64,
      }),
    });
    expect(pair.status).toBe(403);
    expect((await pair.json()).error).toBe('limit_reached');

    const key = await createKey(store, phone.deviceId);
    await expect(createKey(store, phone.deviceId)).rejects.toThrow(/plan limit for keys/);

    const listed = JSON.parse(await run('list', '--json'));
    expect(listed.find((a: any) => a.id === created.id)).toMatchObject({
      email: 'ops@example.com',
      max_phones: 1,
      max_keys: 1,
      phones: 1,
      keys: 1,
      locked: false,
    });

    const { client } = await connectClient(relay.mcpUrl, key.token);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);

    expect(await run('lock', created.id)).toContain('locked');
    await waitFor(async () => (await mcpStatus(key.token)) === 402, 10_000, 'locked account answered 402');
    expect(JSON.parse(await run('list', '--json')).find((a: any) => a.id === created.id).locked).toBe(true);

    expect(await run('unlock', 'ops@example.com')).toContain('unlocked');
    await waitFor(async () => (await mcpStatus(key.token)) === 200, 10_000, 'unlocked account answered 200');
    // The same phone, the same key: nothing was re-paired.
    expect(await store.getDevice(phone.deviceId)).toBeDefined();
    await client.close();
    await expect(run('lock', 'acct_nope')).rejects.toThrow(/no account/);
    // Eleven real CLI processes (about 2 s of CPU each on an idle 2-core machine: Node, the
    // loader, the store) plus a relay and a phone: the full suite's parallel files can triple that.
  }, 180_000);
});
