// Child processes for tests that exercise the real command line: `phonebridge serve`,
// `device run`, `demo`, and the one-shot CLI commands.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const run = promisify(execFile);
export const BIN = fileURLToPath(new URL('../../bin/phonebridge.mjs', import.meta.url));

export interface Child {
  proc: ChildProcess;
  stderr: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The first stdout line that parses as JSON with `ready: true`. */
  ready: Promise<Record<string, any>>;
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startChild(args: string[], env: Record<string, string> = {}, nodeArgs: string[] = []): Child {
  // stdin is a pipe that closes with this process: relays started here never outlive the test run.
  const proc = spawn(process.execPath, [...nodeArgs, BIN, ...args], {
    env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn', PHONEBRIDGE_EXIT_WITH_PARENT: '1', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stderr: string[] = [];
  createInterface({ input: proc.stderr }).on('line', (l) => stderr.push(l));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    proc.once('exit', (code, signal) => r({ code, signal })),
  );
  const ready = new Promise<Record<string, any>>((resolve, reject) => {
    createInterface({ input: proc.stdout }).on('line', (line) => {
      if (!line.startsWith('{')) return;
      try {
        const j = JSON.parse(line);
        if (j.ready) resolve(j);
      } catch {
        // not a JSON line: keep waiting for the ready line
      }
    });
    void exited.then(({ code }) => reject(new Error(`exited (${code}) before ready: ${stderr.slice(-5).join(' | ')}`)));
  });
  ready.catch(() => {});
  return {
    proc,
    stderr,
    exited,
    ready,
    kill: (signal = 'SIGTERM') => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** A one-shot CLI command; resolves with stdout, rejects with stderr on a non-zero exit. */
export async function cli(args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [BIN, ...args], {
    env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn' },
  });
  return stdout.trim();
}

/** A one-shot CLI command, whatever its exit: its code (null when killed at the deadline), stdout and stderr. */
export function cliResult(
  args: string[],
  env: Record<string, string | undefined> = {},
  timeoutMs = 90_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { ...process.env, PHONEBRIDGE_LOG_LEVEL: 'warn', ...env }, timeout: timeoutMs, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        resolve({ code, stdout: String(stdout).trim(), stderr: String(stderr).trim() });
      },
    );
  });
}
