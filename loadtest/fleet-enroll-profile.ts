// Enrollment under contention at the store: N concurrent pairings of one enrollment code through a
// pool of P connections on a fresh Postgres database, sampling pg_stat_activity every 20 ms for
// what the sessions wait on (docs/decisions/0176-enrollment-in-one-statement.md).
//   node --import tsx loadtest/fleet-enroll-profile.ts [N=300] [P=4]
import pg from 'pg';
import { postgresBackend } from '../src/store/test-support.ts';
import { createStore } from '../src/store/kysely-store.ts';
import { createEnrollment } from '../src/fleet/enroll.ts';
import { hashPairingCode, newId } from '../src/crypto/secrets.ts';
import { generateDeviceKey } from '../src/crypto/device-auth.ts';

const N = Number(process.argv[2] ?? 300);
const POOL = Number(process.argv[3] ?? 4);
const backend = postgresBackend();
const source = await backend.open();
const store = await createStore(source, { poolMax: POOL });
await store.ensureAccount('local');
const e = await createEnrollment(store, {
  accountId: 'local',
  maxPhones: N,
  expiresMs: 3600_000,
  relay: 'http://x',
  labels: { site: 'b' },
  namePrefix: 'r-',
});
// A key per phone: phones sharing one would be one phone repeating its pairing
// (docs/decisions/0238-a-pairing-repeated-by-its-phone.md).
const keys = Array.from({ length: N }, () => generateDeviceKey().publicKeySpkiBase64);
const mon = new pg.Client(source.pgConfig);
await mon.connect();
const waits = new Map<string, number>();
let sampling = true;
const sampler = (async () => {
  while (sampling) {
    const { rows } = await mon.query(
      `select coalesce(wait_event_type,'-')||':'||coalesce(wait_event,'-')||' '||state||' '||left(regexp_replace(query,'\\s+',' ','g'),60) k from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
    );
    for (const r of rows) waits.set(r.k, (waits.get(r.k) ?? 0) + 1);
    await new Promise((r) => setTimeout(r, 20));
  }
})();
const t0 = performance.now();
const res = await Promise.all(
  Array.from({ length: N }, (_, i) =>
    store
      .redeemPairingCode({
        codeHash: hashPairingCode(e.code),
        deviceId: newId('dev'),
        publicKey: keys[i],
        name: 'p',
        now: new Date(),
      })
      .then(
        (r) => (r.ok ? 'ok' : r.error),
        (err) => 'throw:' + String(err.message).slice(0, 60),
      ),
  ),
);
const ms = performance.now() - t0;
sampling = false;
await sampler;
const counts = new Map<string, number>();
for (const r of res) counts.set(r, (counts.get(r) ?? 0) + 1);
console.log(
  JSON.stringify({
    N,
    POOL,
    ms: Math.round(ms),
    perS: Math.round(N / (ms / 1000)),
    outcomes: Object.fromEntries(counts),
  }),
);
console.log(
  [...waits]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)
    .map(([k, v]) => `${v}\t${k}`)
    .join('\n'),
);
await mon.end();
await store.close();
await source.close();
await backend.cleanup();
