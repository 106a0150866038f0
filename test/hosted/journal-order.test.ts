// Revocation reaches a node whatever order the journal's transactions commit in: a transaction
// that drew a lower journal id commits after a higher one was read (two real Postgres
// transactions), and a credential lookup in flight when a lock lands does not cache the account
// as unlocked. Real relay, real Postgres, a real phone.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../cluster/harness.ts';
import { startTestPhone, startTestRelay, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { Authenticator } from '../../src/gateway/auth.ts';

let db: Awaited<ReturnType<typeof createDatabase>>;
let relay: TestRelay;
let phone: TestPhone;

beforeAll(async () => {
  db = await createDatabase();
  relay = await startTestRelay(['--database-url', db.url, '--control-poll-ms', '50']);
  phone = await startTestPhone(relay, () => createEchoServer());
}, 60_000);
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
  await db?.drop();
});

async function mcpStatus(token: string): Promise<number> {
  const r = await fetch(relay.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': token,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } }),
  });
  await r.text();
  return r.status;
}

describe('the journal tail', () => {
  it('a revocation whose transaction commits after a later one was read still reaches the node', async () => {
    const early = await relay.key(phone.deviceId, ['devices:read']);
    const late = await relay.key(phone.deviceId, ['devices:read']);
    // Both cached on the node: only the journal (no bus publish here) can end them before 30 s.
    expect(await mcpStatus(early.token)).toBe(200);
    expect(await mcpStatus(late.token)).toBe(200);

    const slow = new pg.Client({ connectionString: db.url });
    await slow.connect();
    try {
      // The revocation as the store writes it (decision 0003): the change, then its journal row,
      // in one transaction that stays open: it holds the lower id.
      await slow.query('begin');
      await slow.query('delete from tokens where id = $1', [early.id]);
      const held = await slow.query<{ id: string }>(
        'insert into control_events (event) values ($1) returning id::text as id',
        [JSON.stringify({ type: 'token_revoked', tokenId: early.id })],
      );
      // A second transaction takes a higher id and commits first; the node reads it.
      expect(await relay.relay.store.store.revokeToken(late.id)).toBe(true);
      const [{ id: lateId }] = (
        await slow.query<{ id: string }>(
          "select max(id)::text as id from control_events where event->>'tokenId' = $1",
          [late.id],
        )
      ).rows;
      expect(BigInt(lateId)).toBeGreaterThan(BigInt(held.rows[0].id));
      await waitFor(async () => (await mcpStatus(late.token)) === 401, 5_000, 'the later revocation applied');
      expect(await mcpStatus(early.token)).toBe(200); // not committed yet: still valid
      await slow.query('commit');
    } finally {
      await slow.end();
    }
    await waitFor(async () => (await mcpStatus(early.token)) === 401, 5_000, 'the earlier id applied after its commit');
  }, 30_000);

  it('a lookup in flight when a lock lands does not cache the account as unlocked', async () => {
    const store = relay.relay.store.store;
    const key = await relay.key(phone.deviceId, ['devices:read']);
    const account = (await store.getDevice(phone.deviceId))!.accountId;
    // The real store; the account read is held after it returned, as a slow query would be.
    let release!: () => void;
    let reached!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const atGate = new Promise<void>((r) => (reached = r));
    let held = true;
    const slowStore = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'getAccount')
          return async (id: string) => {
            const a = await target.getAccount(id);
            if (held) {
              held = false;
              reached();
              await gate;
            }
            return a;
          };
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const auth = new Authenticator(slowStore);
    const lookup = auth.authenticate(key.token);
    await atGate; // read as unlocked
    try {
      await store.setAccountLocked(account, true);
      auth.invalidate({ accountId: account }); // the lock's event lands while the lookup is in flight
      release();
      await lookup;
      expect(auth.cached(key.token)?.account.locked ?? true).toBe(true);
      expect((await auth.authenticate(key.token))?.account.locked).toBe(true);
    } finally {
      release();
      await store.setAccountLocked(account, false);
    }
  });
});
