import { configDefaults, defineConfig } from 'vitest/config';
import { ownProcessFiles } from './test/own-process.ts';

// Integration files that mock, change the process's globals or read its metric registry
// (docs/decisions/0261-integration-files-share-their-workers.md).
const ownProcess = ownProcessFiles();

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Two cores here: integration tests start real servers, so keep parallelism modest.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        // The unit tests next to the code share a worker's module cache (no fresh process per
        // file): none of them mocks a module or changes process-wide state, and importing the
        // sources once per worker instead of once per file saves about 40 % of their CPU.
        test: { name: 'unit', include: ['src/**/*.test.ts'], isolate: false },
      },
      {
        extends: true,
        // Integration files share their workers too (a fresh process per file cost about 3 s of
        // forking and importing; the suite 1,151 → 901 s); each stops what it starts.
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...ownProcess],
          isolate: false,
        },
      },
      {
        extends: true,
        // The files that change or read what the whole process shares (test/own-process.ts); a
        // pattern that matches no file when none does.
        test: { name: 'integration-own-process', include: ownProcess.length ? ownProcess : ['-none-'] },
      },
    ],
  },
});
