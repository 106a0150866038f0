// `npm test`: the static checks (scripts/checks.ts) and the test suite at once. The checks are
// about two minutes of tsc, type-aware ESLint and Prettier that share nothing with the tests,
// which start servers and mostly wait; run one after the other they added their whole time to
// the suite's. The tests' output streams as it comes; the checks' is printed when they end. The
// exit code is non-zero if either failed. Arguments go to `vitest run`.
import { spawn } from 'node:child_process';

function run(cmd: string, args: string[], buffered: boolean): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', buffered ? 'pipe' : 'inherit', buffered ? 'pipe' : 'inherit'] });
    let output = '';
    child.stdout?.on('data', (d) => (output += d));
    child.stderr?.on('data', (d) => (output += d));
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

const [checks, tests] = await Promise.all([
  run(process.execPath, ['--import', 'tsx', 'scripts/checks.ts'], true),
  run('npx', ['vitest', 'run', ...process.argv.slice(2)], false),
]);
console.log(`\n== npm run checks (${checks.code === 0 ? 'ok' : 'FAILED'})`);
console.log(checks.output.trimEnd());
if (tests.code !== 0) console.log(`== vitest run FAILED (exit ${tests.code})`);
process.exit(checks.code === 0 && tests.code === 0 ? 0 : 1);
