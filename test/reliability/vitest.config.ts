import { defineConfig } from 'vitest/config';

// `npm run test:reliability`: fuzzing, crash under load, receiver chaos, owner isolation and slow clients.
// Slow on purpose and kept out of `npm test` (these files are *.spec.ts, which the root config
// does not include). One file at a time, so the timing-sensitive chaos scenario never shares the
// CPU with a crash scenario. The crash scenario runs on SQLite and, when reachable, PostgreSQL
// (TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres; REQUIRE_POSTGRES=true makes
// an unreachable server an error). Figures go to test/reliability/results.md.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/reliability/**/*.spec.ts'],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 120_000,
    setupFiles: ['test/helpers/setup.ts'],
    globalSetup: ['test/reliability/global-setup.ts'],
    env: { TEST_DB: 'sqlite', WORKER_WARMUP: 'false' },
  },
});
