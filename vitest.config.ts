import { defineConfig } from 'vitest/config';

// Integration tests start real servers and child processes: generous timeouts, no timing asserts.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/reliability/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
