// The CLI contract: "Every CLI command takes the same `--data-dir` / `--database-url` as `serve`."
// README.md ("Running it for real") and `phonebridge --help` say so, and that `device run`, which
// opens no database (its phone lives in --state), accepts both and ignores them, refusing only a
// --database-url that is no postgres:// URL with the line (and exit 2) the other commands give.
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../helpers/relay.ts';
import { cliResult } from '../helpers/processes.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir('pb-dr-store-');
  dirs.push(d);
  return d;
}

// A pairing payload that names no relay: the command stops on that (exit 1), after its options.
const NOT_A_PAYLOAD = 'not json';
const PAYLOAD_REFUSED = /^phonebridge: pairing payload is not JSON/;

describe('`phonebridge device run` takes --data-dir / --database-url as every command does', () => {
  it('accepts --data-dir and goes on to the pairing', async () => {
    const d = dir();
    const r = await cliResult(
      ['device', 'run', '--state', join(d, 'phone'), '--data-dir', join(d, 'data'), '--pair', NOT_A_PAYLOAD],
      {},
      15_000,
    );
    expect(r.stderr).not.toMatch(/Unknown option/);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(PAYLOAD_REFUSED);
  }, 20_000);

  it('accepts --database-url and goes on to the pairing, without opening it', async () => {
    const d = dir();
    const r = await cliResult(
      [
        'device',
        'run',
        '--state',
        join(d, 'phone'),
        // Nothing listens on port 1: a command that opened it would fail on that instead.
        '--database-url',
        'postgres://postgres@127.0.0.1:1/postgres',
        '--pair',
        NOT_A_PAYLOAD,
      ],
      {},
      15_000,
    );
    expect(r.stderr).not.toMatch(/Unknown option/);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(PAYLOAD_REFUSED);
  }, 20_000);

  it('refuses a --database-url that is no postgres:// URL with the line `keys list` gives (exit 2)', async () => {
    const d = dir();
    for (const url of ['not a url', 'mysql://db.example/x']) {
      const [device, keys] = await Promise.all([
        cliResult(['device', 'run', '--state', join(d, 'phone'), '--database-url', url, '--pair', NOT_A_PAYLOAD]),
        cliResult(['keys', 'list', '--data-dir', join(d, 'data'), '--database-url', url]),
      ]);
      expect(keys.code, keys.stderr).toBe(2);
      expect(device.code, device.stderr).toBe(2);
      expect(device.stderr).toBe(keys.stderr);
    }
  }, 60_000);
});
