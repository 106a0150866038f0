// Runs `npm run loadtest -- …` (loadtest/run.ts) as a child for the contract tests of the load
// tool's command line (docs/OPERATIONS.md, "Load tests and sizing").
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface LoadtestRun {
  /** The exit code; null when killed at the bound. */
  code: number | null;
  out: string;
}

export function loadtest(
  args: string[],
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
): Promise<LoadtestRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'loadtest/run.ts', ...args],
      { cwd: ROOT, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 << 20, env },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        resolve({ code, out: `${String(stdout)}\n${String(stderr)}` });
      },
    );
  });
}
