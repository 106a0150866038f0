// The fleet commands as people run them, each a real `phonebridge` process against the
// relay's Postgres: enroll create/list/revoke, devices label / list --selector, keys create
// --fleet / list / revoke, and bad input refused with a reason and nothing changed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BIN, cli } from '../helpers/processes.ts';
import { createDatabase } from '../cluster/harness.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { pairRaw } from '../helpers/raw-device.ts';

let db: { url: string; drop(): Promise<void> };
let relay: TestRelay;
beforeAll(async () => {
  db = await createDatabase();
  relay = await startTestRelay(['--database-url', db.url]);
}, 60_000);
afterAll(async () => {
  await relay?.stop();
  await db?.drop();
});

const run = (...args: string[]) => cli([...args, '--database-url', db.url]);

async function fails(...args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, [BIN, ...args, '--database-url', db.url]);
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
  throw new Error(`phonebridge ${args.join(' ')} succeeded`);
}

describe('fleet CLI', () => {
  it('enrolls, labels, selects, and mints and revokes a fleet key', async () => {
    const e = JSON.parse(
      await run(
        'enroll',
        'create',
        '--max-phones',
        '3',
        '--expires',
        '1h',
        '--labels',
        'site=berlin',
        '--name-prefix',
        'rack-',
        '--public-url',
        relay.url,
        '--json',
      ),
    );
    expect(Object.keys(e).sort()).toEqual(['code', 'id', 'qr']);
    expect(e.qr).toEqual({ v: 1, relay: relay.url, code: e.code });
    const one = (await pairRaw(relay.url, e.qr.code)).deviceId;
    const two = (await pairRaw(relay.url, e.qr.code)).deviceId;

    await run('devices', 'label', one, 'model=pixel8');
    await run('devices', 'label', two, 'site-');
    const selected = JSON.parse(await run('devices', 'list', '--selector', 'site=berlin,model=pixel8', '--json'));
    expect(selected.map((d: { id: string }) => d.id)).toEqual([one]);
    expect(selected[0]).toMatchObject({
      name: expect.stringMatching(/^rack-[12]$/),
      labels: { site: 'berlin', model: 'pixel8' },
    });
    const reserved = await fails('devices', 'label', one, 'phonebridge.dev/model=x');
    expect(reserved.code).toBe(64);
    expect(reserved.stderr).toContain('reserved');
    const key = JSON.parse(
      await run('keys', 'create', '--fleet', '--selector', 'site=berlin', '--scopes', 'devices:read', '--json'),
    );
    expect(key).toMatchObject({ fleet: true, selector: 'site=berlin', scopes: ['devices:read'] });
    expect(key.token).toMatch(/^pbf_/);
    const keys = JSON.parse(await run('keys', 'list', '--json'));
    expect(keys.find((k: { id: string }) => k.id === key.id)).toMatchObject({ fleet: true, via: 'fleet' });
    expect(JSON.stringify(keys)).not.toContain(key.token);

    const listed = JSON.parse(await run('enroll', 'list', '--json'));
    expect(listed).toEqual([expect.objectContaining({ id: e.id, used: 2, max_phones: 3, state: 'active' })]);
    expect(await run('keys', 'revoke', key.id)).toContain(key.id);
    expect(await relay.relay.store.store.fleet.getKey(key.id)).toBeUndefined();
  }, 600_000); // ten CLI processes; each takes seconds to start on a loaded machine
});
