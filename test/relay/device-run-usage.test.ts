// Usage mistakes in `phonebridge device run` exit 64 with a line saying what is wrong, as every
// other command's do (docs/OPERATIONS.md, "Exit codes"; services/usage-error.ts): no --state, an
// unknown `device` subcommand, an unknown --backend, a bridge flag without --backend bridge, a
// --seed that is no decimal integer or past the integers a double holds exactly.
import { expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { BIN } from '../helpers/processes.ts';

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const p = execFile(
      process.execPath,
      [BIN, ...args],
      { env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn' } },
      (_e, _o, stderr) => resolve({ code: p.exitCode, stderr }),
    );
  });
}

it('a usage mistake in `phonebridge device run` exits 64 with its reason first, as one in `keys create` does', async () => {
  const reference = await run(['keys', 'create']);
  expect(reference.code, 'keys create without --device').toBe(64);
  for (const [args, line] of [
    [['device', 'run'], 'phonebridge: device run needs --state DIR (where the phone keeps its keys)'],
    [['device', 'start'], 'phonebridge: device: expected "run", got "start"'],
    [
      ['device', 'run', '--state', '/nonexistent-pb-usage', '--backend', 'bogus'],
      'phonebridge: unknown --backend "bogus"; use sim or bridge',
    ],
    [
      ['device', 'run', '--state', '/nonexistent-pb-usage', '--upstream-cmd', 'my-server'],
      'phonebridge: --upstream-cmd needs --backend bridge',
    ],
    [
      // Past Number.MAX_SAFE_INTEGER the seed would round to another seed in silence.
      ['device', 'run', '--state', '/nonexistent-pb-usage', '--seed', '9007199254740993'],
      'phonebridge: --seed must be a non-negative decimal integer (at most 9007199254740991), got "9007199254740993"',
    ],
    [
      ['device', 'run', '--state', '/nonexistent-pb-usage', '--seed', '0x10'],
      'phonebridge: --seed must be a non-negative decimal integer (at most 9007199254740991), got "0x10"',
    ],
    [
      ['device', 'run', '--state', '/nonexistent-pb-usage', '--backend', 'bridge'],
      'phonebridge: device run --backend bridge: give exactly one of --upstream-cmd or --upstream-url',
    ],
  ] as const) {
    const r = await run([...args]);
    expect(r.code, `phonebridge ${args.join(' ')} (stderr: ${r.stderr.split('\n')[0]})`).toBe(64);
    expect(r.stderr.split('\n')[0]).toBe(line);
  }
}, 60_000);
