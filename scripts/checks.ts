// The static checks `npm test` runs before the tests: typecheck, lint and format at once rather
// than one after the other (they share nothing, and each leaves a core idle part of the time).
// Each one's output is printed whole when it ends; the exit code is non-zero if any failed.
import { spawn } from 'node:child_process';

const CHECKS = ['typecheck', 'lint', 'format:check'];

function run(script: string): Promise<{ script: string; code: number; output: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('close', (code) => resolve({ script, code: code ?? 1, output, ms: Date.now() - started }));
  });
}

const results = await Promise.all(CHECKS.map(run));
for (const r of results) {
  console.log(`${r.code === 0 ? 'ok' : 'FAILED'}: npm run ${r.script} (${(r.ms / 1000).toFixed(1)} s)`);
  if (r.output.trim()) console.log(r.output.trimEnd());
}
process.exit(results.every((r) => r.code === 0) ? 0 : 1);
