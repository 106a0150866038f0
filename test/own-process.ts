// Which integration test files need a process of their own rather than a shared worker
// (docs/decisions/0261-integration-files-share-their-workers.md): those that mock a module or
// change the process's globals (environment, timers), and those that read the process's metric
// registry, which every relay started earlier in that process counted into (helpers/metrics,
// src/metrics, or the /metrics of a relay started in-process). `// test: own process` marks a
// file for any other reason.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const MARKS = [
  /\bvi\.(mock|doMock|stubEnv|stubGlobal|useFakeTimers)\b/,
  /process\.env(\.\w+|\[[^\]]+\])\s*=(?!=)|delete process\.env/,
  /helpers\/metrics|src\/metrics/,
  /\/\/ test: own process/,
];
const IN_PROCESS_SCRAPE = /\/metrics\b[\s\S]*\bstart(Test)?Relay\(|\bstart(Test)?Relay\([\s\S]*\/metrics\b/;

/** Whether a test file with this text needs a process of its own. */
export function needsOwnProcess(text: string): boolean {
  return MARKS.some((re) => re.test(text)) || IN_PROCESS_SCRAPE.test(text);
}

/** The `*.test.ts` files under dir that need a process of their own. */
export function ownProcessFiles(dir = 'test'): string[] {
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(d, e.name)) : e.name.endsWith('.test.ts') ? [join(d, e.name)] : [],
    );
  return walk(dir).filter((f) => needsOwnProcess(readFileSync(f, 'utf8')));
}
