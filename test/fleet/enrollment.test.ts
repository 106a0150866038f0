// Enrollment on two nodes over Redis and Postgres: one code pairs 200 light phones at once from
// one address with no 429 (good pairings in flight are not failures), each named with the
// prefix and a counter and labelled; the code is used up at N, stops at revocation, is stored
// only as a hash; wrong codes from the same address are still limited.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { postJson } from '../helpers/raw-device.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import { PAIR_FAILURE_LIMIT } from '../../src/gateway/pairing.ts';
import { createEnrollment } from '../../src/fleet/enroll.ts';
import { Client } from 'pg';

let nodes: TwoNodes;
beforeAll(async () => {
  nodes = await startTwoNodes();
}, 60_000);
afterAll(async () => {
  await nodes?.stop();
});

const pair = (url: string, code: string) =>
  postJson(`${url}/pair`, { code, public_key: generateDeviceKey().publicKeySpkiBase64, name: 'phone' });

describe('an enrollment code', () => {
  it('pairs 200 phones concurrently from one address without a 429, named and labelled; wrong codes are still limited', async () => {
    const store = nodes.a.relay.store.store;
    const e = await createEnrollment(store, {
      accountId: 'local',
      maxPhones: 200,
      expiresMs: 3600_000,
      labels: { site: 'berlin', rack: 'a' },
      namePrefix: 'rack-a-',
      relay: nodes.a.url,
    });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => pair(i % 2 ? nodes.b.url : nodes.a.url, e.qr.code)),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 429)).toEqual([]);
    expect(statuses.every((s) => s === 200)).toBe(true);
    const ids = new Set(results.map((r) => r.json.device_id));
    expect(ids.size).toBe(200);

    const devices = (await store.fleet.listDevices({ accountId: 'local' })).filter((d) => ids.has(d.id));
    expect(devices).toHaveLength(200);
    expect(new Set(devices.map((d) => d.name))).toEqual(
      new Set(Array.from({ length: 200 }, (_, i) => `rack-a-${i + 1}`)),
    );
    expect(devices.every((d) => d.labels.site === 'berlin' && d.labels.rack === 'a')).toBe(true);
    expect((await store.fleet.getEnrollment(e.id))?.used).toBe(200);

    // Used up: the 201st is a wrong code (and counts as one failure).
    expect((await pair(nodes.a.url, e.qr.code)).status).toBe(403);
    // Wrong codes from the same address: the remaining allowance answers 403, the rest 429.
    const wrong = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        pair(i % 2 ? nodes.b.url : nodes.a.url, 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA'),
      ),
    );
    const s = wrong.map((r) => r.status);
    expect(s.filter((x) => x === 403)).toHaveLength(PAIR_FAILURE_LIMIT - 1);
    expect(s.filter((x) => x === 429)).toHaveLength(20 - (PAIR_FAILURE_LIMIT - 1));
  }, 90_000);

  it('is stored only as a hash, and stops pairing once revoked', async () => {
    const store = nodes.a.relay.store.store;
    const e = await createEnrollment(store, {
      accountId: 'local',
      maxPhones: 5,
      expiresMs: 3600_000,
      relay: nodes.a.url,
    });
    const db = new Client({ connectionString: nodes.a.relay.node.ctx.config.databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query('select * from enrollments where id = $1', [e.id]);
      expect(JSON.stringify(rows)).not.toContain(e.code.replace(/-/g, ''));
      expect(rows[0].code_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(rows[0].code_hash).not.toBe(createHash('sha256').update(e.code).digest('hex'));
    } finally {
      await db.end();
    }
    expect(await store.fleet.revokeEnrollment(e.id, new Date())).toBe(true);
    // A revoked code is a wrong code; this address has used its allowance above, so 429 or 403.
    expect([403, 429]).toContain((await pair(nodes.b.url, e.qr.code)).status);
    expect((await store.fleet.getEnrollment(e.id))?.used).toBe(0);
  });
});
