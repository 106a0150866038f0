// A short `npm run loadtest -- fleet`: phones enrolled with one code, orchestrators allocating,
// calling and releasing; the report must say every phone enrolled and no call failed.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'pb-loadtest-fleet-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('npm run loadtest -- fleet (smoke)', () => {
  it('enrolls 40 phones with one code and runs the orchestrators without errors', async () => {
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'loadtest/run.ts', 'fleet', '--phones', '40', '--duration', '4', '--out', out],
        { cwd: ROOT, stdio: 'ignore' },
      );
      const timer = setTimeout(() => child.kill('SIGKILL'), 170_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    const rep = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
    expect(rep.figures.enrolled).toBe(40);
    expect(rep.metrics.allocations.values.count).toBeGreaterThan(0);
    expect(rep.metrics.errors.values.rate).toBe(1);
    expect(code).toBe(0);
  }, 180_000);
});
