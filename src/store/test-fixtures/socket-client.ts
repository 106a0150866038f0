// Run as a separate process by database/embedded.test.ts: joins a data dir the way a CLI command
// does, waits for "go" on stdin, then writes and reads through the socket with several connections.
// Prints one JSON line.
import process from 'node:process';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { openStore } from '../index.ts';

const [dataDir, accountId, deviceId, count] = process.argv.slice(2);
const h = await openStore({ dataDir, role: 'cli', poolMax: 4, waitMs: 0 });
const lines = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
await new Promise<void>((resolve) => lines.once('line', () => resolve()));
lines.close();

const results = await Promise.all(
  Array.from({ length: Number(count) }, (_, i) =>
    h.store.createToken({
      id: `child_${process.pid}_${i}`,
      accountId,
      deviceId,
      hash: `child-${process.pid}-${i}`,
      scopes: ['devices:read'],
      via: 'key',
    }),
  ),
);
// Four queries in flight at once need four simultaneous connections to the socket.
const pool = new pg.Pool({ ...h.source.pgConfig, max: 4 });
await Promise.all(Array.from({ length: 4 }, () => pool.query('select pg_sleep(0.05)')));
const connections = pool.totalCount;
await pool.end();
const devices = await h.store.listDevices(accountId);
process.stdout.write(
  JSON.stringify({
    label: h.source.label,
    host: h.source.pgConfig.host,
    created: results.filter((r) => r.ok).length,
    devices: devices.map((d) => d.id),
    connections,
  }) + '\n',
);
await h.close();
