// loadtest/instructions.ts: callgrind's per-thread dumps read into counts, a window's count net
// of the idle rate, and a function listing whose JIT addresses are named from V8's perf map.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { byFunction, netPerCall, perfMapName, readPerfMap, threadTotals } from '../../loadtest/instructions.ts';

const dir = mkdtempSync(join(tmpdir(), 'pb-instructions-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('instructions', () => {
  it("reads one dump's count per thread, and no other dump's or process's", () => {
    const dump = (name: string, total: number) =>
      writeFileSync(join(dir, name), `version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: ${total}\n`);
    dump('cg.100.2-01', 5000);
    dump('cg.100.2-03', 700);
    dump('cg.100.1-01', 9); // an earlier dump
    dump('cg.100.12-01', 8); // dump 12, not 2
    dump('cg.1000.2-01', 7); // another process
    expect([...threadTotals(dir, 'cg.100', 2).entries()].sort()).toEqual([
      [1, 5000],
      [3, 700],
    ]);
  });

  it('takes the idle rate over the window off the count before dividing by the calls', () => {
    // 1,000,000 instructions in 2,000 ms, 100 per ms of them idle, 4,000 calls.
    expect(netPerCall(1_000_000, 100, 2000, 4000)).toBe(200);
    expect(netPerCall(1_000_000, 100, 2000, 0)).toBeNaN();
  });

  it('names an address inside a perf map entry, the latest entry for a start winning', () => {
    const map = readPerfMap(
      [
        '1000 100 JS:*old file:///x.ts:1:1',
        '2000 10 JS:~b file:///x.ts:2:1',
        '1000 80 JS:*new file:///x.ts:1:1',
        'not a line',
      ].join('\n'),
    );
    expect(perfMapName(map, 0x1000)).toBe('JS:*new file:///x.ts:1:1');
    expect(perfMapName(map, 0x107f)).toBe('JS:*new file:///x.ts:1:1');
    expect(perfMapName(map, 0x1080)).toBeUndefined(); // past the latest entry's end
    expect(perfMapName(map, 0x2005)).toBe('JS:~b file:///x.ts:2:1');
    expect(perfMapName(map, 0xfff)).toBeUndefined();
  });

  it('lists self cost by function: JIT code named, native names kept, the frames below the loop left out', () => {
    const annotated = [
      '1,000 (100.0%)  PROGRAM TOTALS',
      '',
      'Ir                      file:function',
      '1,000 (100.0%)  ???:main [/usr/bin/node]',
      '  400 (40.00%)  ???:0x0000000000001010 [???]',
      '  300 (30.00%)  ???:Builtins_LoadIC [/usr/bin/node]',
      '  200 (20.00%)  ???:0x0000000000001050 [???]',
      '   60 ( 6.00%)  ???:0x0000000000009000 [???]',
      '   40 ( 4.00%)  ./string/memset.S:__memset_avx2 [/usr/lib/libc.so.6]',
    ].join('\n');
    const map = readPerfMap(`1000 100 JS:*scan file://${process.cwd()}/src/protocol/request-bytes.ts:1:1509\n`);
    expect(byFunction(annotated, map)).toEqual([
      { name: 'JS:*scan src/protocol/request-bytes.ts:1:1509', ir: 600 },
      { name: 'Builtins_LoadIC [/usr/bin/node]', ir: 300 },
      { name: '[JIT code, unnamed]', ir: 60 },
      { name: '__memset_avx2 [/usr/lib/libc.so.6]', ir: 40 },
    ]);
  });
});

describe('npm run loadtest -- instructions', () => {
  it('refuses --target and a count that is not a whole number (exit 64) before starting anything', () => {
    const run = (...args: string[]) =>
      spawnSync(process.execPath, ['--import', 'tsx', 'loadtest/run.ts', 'instructions', ...args], {
        encoding: 'utf8',
        timeout: 60_000,
      });
    const target = run('--target', 'http://127.0.0.1:1');
    expect(target.status).toBe(64);
    expect(target.stderr).toMatch(/^instructions: .*'--target'.*it starts and measures its own relay and floor$/m);
    const rounds = run('--rounds', '2.5');
    expect(rounds.status).toBe(64);
    expect(rounds.stderr).toMatch(/^instructions: --rounds takes a whole number above 0, not "2\.5"$/m);
  }, 70_000);
});
