import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Two cores here: integration tests start real servers, so keep parallelism modest.
    maxWorkers: 2,
  },
});
