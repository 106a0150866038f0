import { defineConfig } from 'vitest/config';

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
        // Integration tests start servers, set environment variables and mock modules: each
        // file in a process of its own.
        test: { name: 'integration', include: ['test/**/*.test.ts'] },
      },
    ],
  },
});
